"""The experience store: canonical tables, readers per source, validation, DuckDB queries."""
