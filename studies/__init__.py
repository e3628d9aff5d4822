"""The research lab: the studies behind ENIGMA's defaults (scripts, their results, their params).
Nothing in the product (src/, flows/, tasks/) imports from here; tests/studies/ checks the
scripts still import against today's code."""
