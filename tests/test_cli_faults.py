"""Issue 60's faults in the commands' options, as a new user meets them: a ``--params`` that does
not exist, the package's own defaults outside the repository, an agent whose code calls exit(), a
YAML alias bomb, outputs where nothing can be written, a spec that is a path, and one spelling of
the progress option. Each is one ``error:`` line and exit code 2 before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.cli import app
from enigma.ope.tabular import reference_problem, write_jsonl
from tests.agents import toy_agents as T

REPO = Path(__file__).resolve().parents[1]
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
ENV = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'src'}")
ECHO = "python:enigma.agents.examples:echo"


def enigma(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def error_line(output: str) -> str:
    """The command's one ``error:`` line (and that there is exactly one)."""
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return T.write_tiny_store(tmp_path_factory.mktemp("faults") / "store", n_dialogues=4)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Valid inputs of every command that takes --params or --out."""
    d = tmp_path_factory.mktemp("inputs")
    write_jsonl(reference_problem().logs(20, seed=0), d / "logs.jsonl")
    pd.DataFrame({"estimator": "e", "agent_id": ["a", "b", "c"], "rating": "r", "estimate": [0.1, 0.5, 0.9]}).to_csv(d / "results.csv", index=False)
    pd.DataFrame({"agent_id": ["a", "b", "c"], "rating": "r", "value": [0.2, 0.4, 0.8]}).to_csv(d / "truth.csv", index=False)
    return {"jsonl": d / "logs.jsonl", "results": d / "results.csv", "truth": d / "truth.csv"}


# ---- case 1: a --params that does not exist --------------------------------------------------


def _commands(store: Path, inputs: dict[str, Path], out: Path, cache: Path) -> dict[str, list]:
    """Commands that take --params and --out, on valid inputs, writing under ``out`` (and ``cache``)."""
    return {
        "estimate": ["estimate", "-e", store, "-t", f"t={ECHO}", "--encoder", "onehot", "-o", out, "--cache-dir", cache],
        "sample": ["sample", store, ECHO, "--cache-dir", cache, "-o", out / "t.parquet"],
        "ingest": ["ingest", "jsonl", inputs["jsonl"], "--out", out, "--scale", "match=0:1", "--scale", "short=0:1"],
        "report build": ["report", "build", "--results", inputs["results"], "--benchmark", "b", "--truth", inputs["truth"],
                         "--out", out, "--no-plots"],
    }


# ingest, encode and simulate refused it already (tests/store/test_store_cli.py, tests/encoders/test_warm.py);
# they share the check now
@pytest.mark.parametrize("command", ["estimate", "sample", "report build"])
def test_a_params_file_that_does_not_exist_is_refused_before_any_work(command, store, inputs, tmp_path):
    out = tmp_path / "out"
    r = enigma(*_commands(store, inputs, out, out / "cache")[command], "--params", tmp_path / "does-not-exist.yaml")
    assert r.exit_code == 2, r.output
    assert "does-not-exist.yaml: parameters file not found" in error_line(r.output)
    assert not out.exists()  # nothing ran on the built-in defaults instead


def test_serve_refuses_a_params_file_that_does_not_exist(tmp_path):
    # a subprocess: on the built-in defaults the server would start and never return
    argv = ENIGMA + ["serve", ECHO, "--port", "1", "--params", str(tmp_path / "does-not-exist.yaml")]
    r = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "does-not-exist.yaml: parameters file not found" in error_line(r.stderr), r.stderr


def test_without_params_yaml_enigma_runs_what_the_repositorys_params_yaml_runs(tmp_path, monkeypatch):
    """The estimator a user who installed the package gets (no ./params.yaml) is the documented
    default: the one the repository's params.yaml resolves, as `enigma estimate` resolves it."""
    from enigma.estimators import dice_config
    from enigma.ope.config import FqeConfig
    from enigma.params import DEFAULT_PARAMS, Params

    repo = dice_config("enigma", Params.load(REPO / "params.yaml"))
    monkeypatch.chdir(tmp_path)  # an empty folder
    built_in = dice_config("enigma", Params.load(DEFAULT_PARAMS, missing="defaults"))
    assert built_in.model_dump() == repo.model_dump()
    assert (built_in.solver.name, built_in.value.kind, built_in.interval.resamples) == ("exact_nu", "dr", 100)
    # the adopted Q schedule (issue 71): 2 fits of 45 epochs for ENIGMA; FqeConfig's own default, which the presets start from, stays 20
    assert (built_in.value.fqe.epochs, repo.value.fqe.epochs, FqeConfig().epochs) == (45, 45, 20)
    assert (built_in.value.fqe.ensemble, repo.value.fqe.ensemble, FqeConfig().ensemble) == (2, 2, 1)
    # a params file without an estimators section runs it too
    (tmp_path / "mine.yaml").write_text("sample: {n_samples: 1}\n")
    assert dice_config("enigma", Params.load(tmp_path / "mine.yaml")) == repo
    # and the library's bare defaults are that ENIGMA, not the gradient descent-ascent preset: the
    # estimator without a config, and a dice section that names no preset (its keys override it)
    from enigma.ope import DiceConfig, EnigmaEstimator

    assert EnigmaEstimator().config == repo and DiceConfig.from_section(None) == repo
    assert DiceConfig.from_section({"steps": 7}) == repo.with_flat(steps=7)
    assert DiceConfig.from_section({"preset": "gda"}).solver.name == "gda"


@pytest.mark.slow
def test_enigma_estimate_from_an_empty_folder_records_the_repositorys_default(tmp_path, monkeypatch):
    """The same through the command (about 10 s): the config its result records."""
    from enigma.estimators import dice_config
    from enigma.params import Params

    problem = reference_problem()
    write_jsonl(problem.logs(200, seed=0), tmp_path / "logs.jsonl")
    monkeypatch.chdir(tmp_path)
    assert enigma("ingest", "jsonl", "logs.jsonl", "--out", "store", "--scale", "match=0:1", "--scale", "short=0:1",
                  "--no-progress").exit_code == 0
    r = enigma("estimate", "-e", "store", "-t", "steady=python:enigma.ope.tabular:steady", "--encoder", "onehot", "-o", "out",
               "--cache-dir", "cache", "--no-progress")
    assert r.exit_code in (0, 3), r.output
    recorded = json.loads((tmp_path / "out" / "estimates.json").read_text())["diagnostics"]["steady"]["config"]
    repo = Params.load(REPO / "params.yaml")
    entry = repo.estimators["enigma"]
    repo = repo.model_copy(update={"estimators": {"enigma": entry.model_copy(update={"dice": {**entry.dice, "encoder": "onehot"}})}})
    expected = dice_config("enigma", repo).flat()  # a run records the flat section's words
    # the run records the slots it derived from these logs (2 agent turns: the authors' 15)
    assert expected["tmax"] is None and recorded["tmax"] == 15
    assert {**recorded, "tmax": None} == expected


# ---- case 3: an agent whose code calls exit() -------------------------------------------------


def test_a_factory_that_calls_exit_is_an_unusable_agent_not_a_silent_end(store, tmp_path):
    r = enigma("estimate", "-e", store, "-t", "t=python:builtins:exit", "-o", tmp_path / "out", "--params", REPO / "params.yaml",
               "--cache-dir", tmp_path / "cache", "--no-progress")
    assert r.exit_code == 2, r.output
    assert error_line(r.output).startswith("error: agent python:builtins:exit: its factory builtins.exit() called exit(")


def test_an_agent_that_calls_exit_while_replying_is_named(store, tmp_path, monkeypatch):
    (tmp_path / "quitting_agent_60.py").write_text(
        "class Quits:\n    def respond(self, history, n=1, seed=None):\n        raise SystemExit(0)\n\n"
        "def make():\n    return Quits()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "python:quitting_agent_60:make"
    r = enigma("sample", store, spec, "--cache-dir", tmp_path / "cache", "-o", tmp_path / "t.parquet", "--no-progress",
               "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output) == f"error: agent {spec}: its code called exit(0)"
    assert not (tmp_path / "t.parquet").exists()


# ---- case 5: a YAML alias bomb in --params ----------------------------------------------------


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    lines = ["a: &a [" + ", ".join(['"x"'] * 9) + "]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):  # 9 levels of 9 aliases: 9^9 values once expanded
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert len(bomb.read_bytes()) < 500
    argv = ENIGMA + ["estimate", "-e", str(tmp_path / "store"), "-t", f"t={ECHO}", "-o", str(tmp_path / "out"), "--params", str(bomb)]

    def four_gib():  # the old expansion took 6 GB and 45 s; never let the check cost that
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    t0 = time.monotonic()
    r = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=60, preexec_fn=four_gib)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "bomb.yaml: its aliases expand to more than" in error_line(r.stderr)
    assert time.monotonic() - t0 < 30


def test_the_aliases_of_params_yaml_still_load(tmp_path):
    from enigma.params import Params

    text = (REPO / "params.yaml").read_text()
    assert "&see2019_source" in text and "&stand_in_estimators" in text
    Params.load(REPO / "params.yaml")
    (tmp_path / "loop.yaml").write_text("nightly: &n {estimators: [*n]}\n")
    r = enigma("report", "build", "--results", tmp_path, "--benchmark", "b", "--truth", tmp_path, "--params", tmp_path / "loop.yaml")
    assert r.exit_code == 2 and "loop.yaml: an alias refers to a block that contains it" in error_line(r.output)


# ---- cases 6 and 8: outputs where nothing can be written --------------------------------------


@pytest.mark.parametrize("bad", ["/dev/null/x", "/sys/enigma-issue-60", "FILE"])
@pytest.mark.parametrize("command", ["estimate", "sample", "ingest", "report build"])
def test_an_output_nothing_can_be_written_at_is_refused_before_any_work(command, bad, store, inputs, tmp_path):
    if bad == "FILE":  # case 8: an existing file where the output goes
        bad = tmp_path / "a-file"
        bad.write_text("keep me\n")
    out = Path(bad)
    r = enigma(*_commands(store, inputs, out, tmp_path / "cache")[command], "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output).startswith(f"error: --out {out}"), r.output
    assert not (tmp_path / "cache").exists()  # nothing was sampled first
    if bad == tmp_path / "a-file":
        assert bad.read_text() == "keep me\n"


def test_estimate_onto_an_existing_file_stops_before_sampling(store, tmp_path):
    (tmp_path / "out").write_text("")
    r = enigma("estimate", "-e", store, "-t", f"t={ECHO}", "-o", tmp_path / "out", "--cache-dir", tmp_path / "cache",
               "--params", REPO / "params.yaml", "--no-progress")
    assert r.exit_code == 2 and error_line(r.output) == f"error: --out {tmp_path / 'out'}: a file is there, not a folder"
    assert not (tmp_path / "cache").exists()


# ---- case 9: a spec that is a path ------------------------------------------------------------


@pytest.mark.parametrize("spec", ["python:../../etc/passwd:x", "python:/etc/passwd:x", "python:.relative:x"])
def test_a_python_spec_that_is_a_path_is_one_error_line(spec, store, tmp_path):
    r = enigma("estimate", "-e", store, "-t", f"t={spec}", "-o", tmp_path / "out", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output).startswith(f"error: agent spec {spec!r}: ") and "not a dotted module name" in r.output


# ---- case 16: one spelling of the progress option ---------------------------------------------


def test_estimate_and_sample_take_no_progress_as_the_other_commands_do(store, inputs, tmp_path):
    for flag in ("--no-progress", "-q"):  # -q stays as the old spelling
        s = enigma("sample", store, ECHO, "--cache-dir", tmp_path / "cache", "-o", tmp_path / "t.parquet", flag,
                   "--params", REPO / "params.yaml")
        assert s.exit_code == 0, s.output
        assert pq.read_table(tmp_path / "t.parquet").num_rows > 0
    help_text = enigma("estimate", "--help").output
    assert "--no-progress" in help_text and "--quiet" not in help_text


def test_a_knowledge_base_whose_factory_exits_or_fails_is_one_named_line(store, tmp_path, monkeypatch):
    """``dice.knowledge`` names the user's own code too: its exit() or its exception is one error
    line naming the setting, exit 2, before any work (it was the plug-in's exit code, or a traceback)."""
    import yaml

    (tmp_path / "user_knowledge_59.py").write_text(
        "def quits():\n    exit(3)\n\ndef breaks():\n    raise KeyError('timetable')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for factory, says in {"quits": "user_knowledge_59.quits() called exit(3)",
                          "breaks": "user_knowledge_59.breaks() raised KeyError: 'timetable'"}.items():
        params = yaml.safe_load((REPO / "params.yaml").read_text())
        spec = f"python:user_knowledge_59:{factory}"
        params["estimators"]["enigma"]["dice"].update(knowledge=spec, interval_resamples=0)
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        r = enigma("estimate", "-e", store, "-t", f"t={ECHO}", "-o", tmp_path / "out", "--params", tmp_path / "params.yaml",
                   "--cache-dir", tmp_path / "cache", "--no-progress")
        assert r.exit_code == 2, r.output
        line = error_line(r.output)
        assert f"dice.knowledge {spec!r}" in line and says in line, line
        assert not (tmp_path / "out" / "estimates.json").exists()


def test_a_setting_of_the_other_solver_in_the_params_file_is_one_named_line(store, tmp_path):
    """``lr`` is gradient descent-ascent's; ENIGMA's default solves by exact_nu, which has none. Set
    in the user's params file it was silently ignored (the run used no lr at all); now it is one
    error line naming the key and both solvers, exit 2, before any work."""
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["estimators"]["enigma"]["dice"].update(lr=0.05, interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "-e", store, "-t", f"t={ECHO}", "-o", tmp_path / "out", "--params", tmp_path / "params.yaml",
               "--cache-dir", tmp_path / "cache", "--no-progress")
    assert r.exit_code == 2, r.output
    assert "dice.lr is a setting of solver gda; solver exact_nu has no lr" in error_line(r.output)
    assert not (tmp_path / "out" / "estimates.json").exists()


# ---- issue 73: faults, round three ------------------------------------------------------------

DYING_AGENTS = (
    "import os, time\n"
    "from enigma.agents.examples import EchoAgent\n\n"
    "class Dies(EchoAgent):\n"
    "    def respond(self, history, n=1, seed=None):\n"
    "        os._exit(0)\n\n"
    "class Hangs(EchoAgent):\n"
    "    def respond(self, history, n=1, seed=None):\n"
    "        time.sleep(600)\n\n"
    "def dies():\n    return Dies()\n\n"
    "def hangs():\n    return Hangs()\n\n"
    "def dies_loading():\n    os._exit(0)\n"
)


def _params_with(tmp_path: Path, **sections) -> Path:
    """The repository's params.yaml with ``sections`` (dotted keys) set."""
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for dotted, value in sections.items():
        *path, last = dotted.split(".")
        node = params
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    f = tmp_path / "params-73.yaml"
    f.write_text(yaml.safe_dump(params))
    return f


def _run(argv: list, cwd: Path, timeout: float = 120, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    """The command in a process of its own: an agent that ends its process would end pytest's."""
    env = dict(ENV)
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}{os.pathsep}{env['PYTHONPATH']}"
    return subprocess.run(ENIGMA + [str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("factory", ["dies", "dies_loading"])
@pytest.mark.parametrize("command", ["sample", "estimate"])
def test_an_agent_that_ends_its_process_is_named_not_a_silent_exit_0(command, factory, store, tmp_path):
    (tmp_path / "dying_agents_73.py").write_text(DYING_AGENTS)
    spec = f"python:dying_agents_73:{factory}"
    argv = {"sample": ["sample", store, spec, "-o", tmp_path / "t.parquet"],
            "estimate": ["estimate", "-e", store, "-t", f"t={spec}", "--encoder", "onehot", "-o", tmp_path / "out"]}[command]
    r = _run(argv + ["--cache-dir", tmp_path / "cache", "--no-progress", "--params", REPO / "params.yaml"], tmp_path,
             extra_path=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    line = error_line(r.stderr)
    during = "while loading" if factory == "dies_loading" else "while answering"
    assert line.startswith(f"error: agent {spec}: its process ended with exit code 0 {during}"), line
    assert not (tmp_path / "t.parquet").exists() and not (tmp_path / "out" / "estimates.json").exists()


@pytest.mark.parametrize("command", ["sample", "estimate"])
def test_an_agent_that_hangs_is_stopped_after_the_call_timeout(command, store, tmp_path):
    (tmp_path / "dying_agents_73.py").write_text(DYING_AGENTS)
    spec = "python:dying_agents_73:hangs"
    params = _params_with(tmp_path, **{"sample.agents.python": {"call_timeout_s": 2}})
    argv = {"sample": ["sample", store, spec, "-o", tmp_path / "t.parquet"],
            "estimate": ["estimate", "-e", store, "-t", f"t={spec}", "--encoder", "onehot", "-o", tmp_path / "out"]}[command]
    t0 = time.monotonic()
    r = _run(argv + ["--cache-dir", tmp_path / "cache", "--no-progress", "--params", params], tmp_path, extra_path=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert error_line(r.stderr) == (f"error: agent {spec}: no answer within 2 s while answering (respond) "
                                    "(sample.agents.python.call_timeout_s); its process was stopped")
    assert time.monotonic() - t0 < 60


def test_an_exception_of_an_agent_in_its_own_process_is_recorded_as_in_the_commands(store, tmp_path):
    """The agent's own exception class (its module is not imported in the command's process) is
    recorded by its name and text, the run goes on, and the worker answers the next calls."""
    (tmp_path / "raising_agent_73.py").write_text(
        "from enigma.agents.examples import EchoAgent\n\nclass TimetableDown(Exception):\n    pass\n\n"
        "class Sometimes(EchoAgent):\n    def respond(self, history, n=1, seed=None):\n"
        "        if history and history[-1].text.endswith('d1'):\n            raise TimetableDown('no trains today')\n"
        "        return super().respond(history, n, seed)\n\ndef make():\n    return Sometimes()\n")
    r = _run(["sample", store, "python:raising_agent_73:make", "-o", tmp_path / "t.parquet", "--cache-dir", tmp_path / "cache",
              "--no-progress", "--params", REPO / "params.yaml"], tmp_path, extra_path=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert {x["error"] for x in rows} == {None, "TimetableDown: no trains today"}
    assert all(x["text"] for x in rows if x["error"] is None)


def test_an_agent_in_its_own_process_gives_the_replies_it_gives_in_the_commands(store, tmp_path):
    """Isolation changes no reply: a seller sampled in its process and in the command's, bit for bit."""
    from enigma.sim.generate import rollout_store
    from enigma.sim.sellers import make_seller

    sellers = rollout_store(make_seller("careless"), "careless", n=6, seed=0).write(tmp_path / "sellers")
    spec = "python:enigma.sim.sellers:expert"
    tables = {}
    for isolate in (True, False):
        params = _params_with(tmp_path, **{"sample.agents.python": {"isolate": isolate}})
        r = enigma("sample", sellers, spec, "-n", 2, "--cache-dir", tmp_path / f"cache-{isolate}", "-o",
                   tmp_path / f"{isolate}.parquet", "--no-progress", "--params", params)
        assert r.exit_code == 0, r.output
        tables[isolate] = pq.read_table(tmp_path / f"{isolate}.parquet")
    assert tables[True].num_rows > 20 and tables[True].equals(tables[False])
    assert tables[True].schema.metadata == tables[False].schema.metadata  # the same agent fingerprint


# ---- issue 73 items 2, 3: a write that fails (a full disk, a device) -----------------------------


class FullDisk:
    """A folder on a disk that can be filled for real: a 2 MB tmpfs mounted there where this
    process may mount one (root), else a file-size limit of 256 bytes (RLIMIT_FSIZE: a write past
    it fails with EFBIG; tempfile's probe of 4 bytes still passes) on the commands run after
    ``fill()``. Commands run through ``run``."""

    def __init__(self, root: Path):
        self.dir = root / "disk"
        self.dir.mkdir()
        self.mounted = os.environ.get("ENIGMA_TEST_NO_MOUNT") != "1" and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(self.dir)], capture_output=True).returncode == 0
        self.full = False

    def fill(self) -> None:
        if self.mounted:
            try:
                with open(self.dir / ".filler", "wb", buffering=0) as fh:
                    while True:
                        fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == 28, exc
            # what the write check of the options needs (an empty folder) still fits: the output does not
        self.full = True

    def run(self, *args, timeout: float = 300) -> subprocess.CompletedProcess:
        def few_bytes():
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (256, resource.RLIM_INFINITY))

        limit = few_bytes if self.full and not self.mounted else None
        return subprocess.run(ENIGMA + [str(a) for a in args], env=ENV, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=limit)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.dir)], capture_output=True)


@pytest.fixture
def full_disk(tmp_path):
    disk = FullDisk(tmp_path)
    yield disk
    disk.close()


DISK_FULL = ("No space left on device", "File too large")  # ENOSPC on the tmpfs, EFBIG under the limit


def _disk_error(r: subprocess.CompletedProcess, under: Path) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    line = error_line(r.stderr)
    assert line.startswith(f"error: {under}") and any(why in line for why in DISK_FULL), line
    return line


def _sampled(tmp_path: Path, store: Path, out: Path, n: int, cache: Path) -> None:
    r = subprocess.run(ENIGMA + ["sample", str(store), ECHO, "-n", str(n), "--cache-dir", str(cache), "-o", str(out),
                                 "--no-progress", "--params", str(REPO / "params.yaml")],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_sample_onto_a_device_that_refuses_the_write_keeps_the_device(store, tmp_path):
    """-o /dev/full: pyarrow removed the path it could not write, here a device node (as root:
    /dev/full itself). A copy of /dev/full where one can be made (root), else /dev/full."""
    device = Path("/dev/full")
    if os.geteuid() == 0:
        device = tmp_path / "full"
        os.mknod(device, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 7))
    r = subprocess.run(ENIGMA + ["sample", str(store), ECHO, "--cache-dir", str(tmp_path / "cache"), "-o", str(device),
                                 "--no-progress", "--params", str(REPO / "params.yaml")],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert error_line(r.stderr) == f"error: {device}: cannot write it (No space left on device)"
    assert device.is_char_device()


def test_sample_onto_a_full_disk_keeps_the_old_targets(store, tmp_path, full_disk):
    out, cache = full_disk.dir / "targets.parquet", tmp_path / "cache"
    _sampled(tmp_path, store, tmp_path / "two.parquet", 2, cache)  # the cache holds every reply of the run below
    _sampled(tmp_path, store, out, 1, cache)
    before = out.read_bytes()
    full_disk.fill()
    r = full_disk.run("sample", store, ECHO, "-n", 2, "--cache-dir", cache, "-o", out, "--no-progress",
                      "--params", REPO / "params.yaml")
    _disk_error(r, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in full_disk.dir.iterdir()) == sorted([".filler", "targets.parquet"][not full_disk.mounted:])


def test_ingest_onto_a_full_disk_keeps_the_old_store(inputs, tmp_path, full_disk):
    from enigma.store.experience import ExperienceStore

    out = full_disk.dir / "store"
    argv = ["ingest", "jsonl", inputs["jsonl"], "--out", out, "--scale", "match=0:1", "--scale", "short=0:1", "--no-progress"]
    assert full_disk.run(*argv).returncode == 0
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    full_disk.fill()
    _disk_error(full_disk.run(*argv), out)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert ExperienceStore.open(out).dialogues.num_rows == 20
    assert not [p for p in full_disk.dir.iterdir() if p.name not in ("store", ".filler")]  # no half-written copy


def test_estimate_onto_a_full_disk_leaves_no_result(store, tmp_path, full_disk):
    cache, out = tmp_path / "cache", full_disk.dir / "out"
    argv = ["estimate", "-e", store, "-t", f"t={ECHO}", "--encoder", "onehot", "--cache-dir", cache, "--no-progress",
            "--params", _params_with(tmp_path, **{"estimators.enigma.dice.interval_resamples": 0})]
    assert full_disk.run(*argv, "-o", tmp_path / "first").returncode in (0, 3)  # the samples are cached
    full_disk.fill()
    _disk_error(full_disk.run(*argv, "-o", out), out)
    left = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert left == [], left  # no estimates.json, no result file a rerun would take as finished


@pytest.mark.parametrize("command", ["sample", "estimate"])
def test_a_cache_dir_on_a_full_disk_is_one_error_line(command, store, tmp_path, full_disk):
    cache = full_disk.dir / "cache"
    full_disk.fill()
    argv = {"sample": ["sample", store, ECHO, "-o", tmp_path / "t.parquet"],
            "estimate": ["estimate", "-e", store, "-t", f"t={ECHO}", "--encoder", "onehot", "-o", tmp_path / "out"]}[command]
    _disk_error(full_disk.run(*argv, "--cache-dir", cache, "--no-progress", "--params", REPO / "params.yaml"), cache)
    assert not [p for p in cache.rglob("*") if p.is_file() and p.name != "agent.json"] if cache.exists() else True
    assert not (tmp_path / "t.parquet").exists() and not (tmp_path / "out" / "estimates.json").exists()


# ---- issue 73 item 4: a store whose ratings are all missing ------------------------------------


def test_a_store_whose_dialogues_carry_no_rating_is_refused_by_estimate(tmp_path):
    """Ingested with --scale, but no line has the rating: every rating_overall is null. estimate
    printed overall=n/a and exit 0; the README says a store with no ratings is exit 2."""
    lines = [{"dialog_id": f"d{i}", "agent_id": f"a{i % 2}", "turns": [{"role": "user", "text": f"hi {i}"},
                                                                       {"role": "agent", "text": f"hello {i}"}]}
             for i in range(6)]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    r = enigma("ingest", "jsonl", tmp_path / "x.jsonl", "--out", tmp_path / "store", "--scale", "overall=1:5",
               "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 0, r.output
    r = enigma("estimate", "-e", tmp_path / "store", "-t", f"t={ECHO}", "--encoder", "onehot", "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "cache", "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output) == (
        f"error: {tmp_path / 'store'}: no dialogue has a rating (overall: 0 of 6 rated), so there is nothing to "
        "estimate; ingest the ratings with the dialogues")
    assert not (tmp_path / "cache").exists()  # refused before any work


# ---- issue 73 item 5: a --scale that maps every rating to nan or 0, or one given twice ---------


@pytest.mark.parametrize("scale, says", [
    ("match=0:1/nan", "the divisor must be a finite number above 0, got nan"),
    ("match=0:1/inf", "the divisor must be a finite number above 0, got inf"),
    ("match=0:1/0", "the divisor must be a finite number above 0, got 0"),
    ("match=0:1/-4", "the divisor must be a finite number above 0, got -4"),
    ("match=1:1", "min must be below max, got min=1 max=1"),
    ("match=2:1", "min must be below max, got min=2 max=1"),
    ("match=nan:1", "min and max must be finite numbers, got min=nan max=1"),
    ("match=0:inf", "min and max must be finite numbers, got min=0 max=inf"),
])
def test_a_scale_that_cannot_normalise_is_one_line_naming_the_option(scale, says, inputs, tmp_path):
    r = enigma("ingest", "jsonl", inputs["jsonl"], "--out", tmp_path / "store", "--scale", scale, "--scale", "short=0:1",
               "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: --scale {scale!r}: {says}"
    assert not (tmp_path / "store").exists()


def test_a_scale_given_twice_for_one_rating_is_refused(inputs, tmp_path):
    r = enigma("ingest", "jsonl", inputs["jsonl"], "--out", tmp_path / "store", "--scale", "match=0:1",
               "--scale", "short=0:1", "--scale", "match=1:5", "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output) == "error: --scale: rating 'match' given twice ('match=0:1' and 'match=1:5'); give each rating one scale"
    assert not (tmp_path / "store").exists()


def test_a_scale_in_params_yaml_with_a_divisor_that_is_not_finite_is_refused(inputs, tmp_path):
    params = _params_with(tmp_path, **{"ingest.sources.jsonl.ratings": {"match": {"min": 0, "max": 1, "normalise": "divide",
                                                                                  "divisor": float("inf")}}})
    r = enigma("ingest", "jsonl", inputs["jsonl"], "--out", tmp_path / "store", "--scale", "short=0:1", "--no-progress",
               "--params", params)
    assert r.exit_code == 2, r.output
    assert f"{params}: section 'ingest'" in error_line(r.output)  # params.yaml's report: the key on the lines below
    assert "the divisor must be a finite number above 0, got inf" in r.output
    assert not (tmp_path / "store").exists()


# ---- issue 73 item 6: a target name too long for a file name -------------------------------------


@pytest.mark.parametrize("name", ["t" * 300, "é" * 60], ids=["300 characters", "60 é"])
@pytest.mark.parametrize("option", ["--target", "--target-actions"])
def test_a_target_name_too_long_for_its_result_files_is_refused_before_any_work(option, name, store, tmp_path):
    """A name becomes the result files' names (quoted: é is %C3%A9, 6 bytes): 300 characters, or
    60 é, ended in ENAMETOOLONG's traceback once the training was done."""
    value = f"{name}={ECHO}" if option == "--target" else f"{name}={tmp_path / 'replies.parquet'}"
    if option == "--target-actions":
        _sampled(tmp_path, store, tmp_path / "replies.parquet", 1, tmp_path / "sampled")
    r = enigma("estimate", "-e", store, option, value, "--encoder", "onehot", "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "cache", "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    line = error_line(r.output)
    assert line.startswith(f"error: {option} {name[:24]}...: the name is too long for its result files (") and "choose a shorter name" in line
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()


def test_a_long_target_name_that_fits_is_estimated(store, tmp_path):
    name = "é" * 35  # 210 bytes quoted: its longest file name, a temporary one, has at most 236 bytes
    r = enigma("estimate", "-e", store, "-t", f"{name}={ECHO}", "--encoder", "onehot", "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "cache", "--no-progress", "--params",
               _params_with(tmp_path, **{"estimators.enigma.dice.interval_resamples": 0}))
    assert r.exit_code in (0, 3), r.output
    assert name in json.loads((tmp_path / "out" / "estimates.json").read_text())["targets"]


# ---- issue 73 item 7: a --cache-dir that is a file ------------------------------------------------


@pytest.mark.parametrize("under", [False, True], ids=["a file", "under a file"])
@pytest.mark.parametrize("command", ["sample", "estimate"])
def test_a_cache_dir_that_is_a_file_is_refused_before_any_work(command, under, store, tmp_path):
    (tmp_path / "a-file").write_text("keep me\n")
    cache = tmp_path / "a-file" / "cache" if under else tmp_path / "a-file"
    argv = {"sample": ["sample", store, ECHO, "-o", tmp_path / "t.parquet"],
            "estimate": ["estimate", "-e", store, "-t", f"t={ECHO}", "--encoder", "onehot", "-o", tmp_path / "out"]}[command]
    r = enigma(*argv, "--cache-dir", cache, "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    says = f"{tmp_path / 'a-file'} is a file, so no folder can be made under it" if under else "a file is there, not a folder"
    assert error_line(r.output) == f"error: --cache-dir {cache}: {says}"
    assert (tmp_path / "a-file").read_text() == "keep me\n" and not (tmp_path / "out").exists()


def test_a_sample_cache_dir_in_params_that_is_a_file_is_named(store, tmp_path):
    (tmp_path / "a-file").write_text("")
    params = _params_with(tmp_path, **{"sample.cache_dir": str(tmp_path / "a-file")})
    for argv in (["sample", store, ECHO, "-o", tmp_path / "t.parquet"],
                 ["estimate", "-e", store, "-t", f"t={ECHO}", "--encoder", "onehot", "-o", tmp_path / "out"]):
        r = enigma(*argv, "--no-progress", "--params", params)
        assert r.exit_code == 2, r.output
        assert error_line(r.output) == f"error: sample.cache_dir {tmp_path / 'a-file'}: a file is there, not a folder"


# ---- issue 73 item 11: an unknown key inside a turn -------------------------------------------------


def test_an_unknown_key_inside_a_turn_is_a_reject_row_not_silently_dropped(tmp_path):
    lines = [{"dialog_id": f"d{i}", "agent_id": "a", "ratings": {"overall": 3},
              "turns": [{"role": "user", "text": f"u{i}"}, {"role": "agent", "text": f"hi {i}"}]} for i in range(3)]
    lines[1]["turns"][0]["ts"] = 1
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    r = enigma("ingest", "jsonl", tmp_path / "x.jsonl", "--out", tmp_path / "store", "--scale", "overall=1:5",
               "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 0, r.output
    rejects = pq.read_table(tmp_path / "store" / "rejects.parquet").to_pylist()
    assert [(Path(x["source_file"]).name, x["record"], x["dialog_id"], x["field"]) for x in rejects] == [("x.jsonl", 2, "d1", "turns[0].ts")]
    assert rejects[0]["reason"] == "unknown field(s) ['ts'] in a turn; allowed: ['role', 'text'] (keep more in the dialogue's meta)"
    assert "[turns[0].ts] unknown field(s) ['ts'] in a turn" in r.output  # the CLI's rejects by reason
    assert pq.read_table(tmp_path / "store" / "dialogues.parquet").column("dialog_id").to_pylist() == ["d0", "d2"]


# ---- issue 73 item 12: a --benchmark that is a path -------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped", "ABS", "a/b", "..", ".", "", "x\\y"])
def test_a_benchmark_name_that_is_a_path_is_refused(name, inputs, tmp_path):
    if name == "ABS":
        name = str(tmp_path / "escaped")
    out = tmp_path / "reports" / "here"
    r = enigma("report", "build", "--results", inputs["results"], "--benchmark", name, "--truth", inputs["truth"],
               "--out", out, "--no-plots", "--params", REPO / "params.yaml")
    assert r.exit_code == 2, r.output
    assert error_line(r.output) == (f"error: --benchmark {name!r}: expected a plain name (no / or \\, not . or ..), "
                                    "as it names the report's folder under --out")
    assert not (tmp_path / "escaped").exists() and not out.exists()


def test_a_plain_benchmark_name_builds_its_report_under_out(inputs, tmp_path):
    r = enigma("report", "build", "--results", inputs["results"], "--benchmark", "mine-2.0", "--truth", inputs["truth"],
               "--out", tmp_path / "reports", "--no-plots", "--params", REPO / "params.yaml")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "reports" / "mine-2.0" / "summary.json").is_file()


# ---- issue 73 notes: what the package's own defaults do -------------------------------------------


def test_outside_a_project_a_stand_in_records_its_sources_as_documented(store, tmp_path, monkeypatch):
    """docs/agents.md: ``sample.agents.transcripts.sources`` is on by default, as params.yaml sets
    it; the package's built-in default was off, so outside a project (no ./params.yaml) a stand-in
    recorded no sources. The whole built-in ``sample`` section is now the repository's."""
    from enigma.params import DEFAULT_PARAMS, Params

    monkeypatch.chdir(tmp_path)  # an empty folder: the built-in defaults
    r = enigma("sample", store, f"transcripts:{store}?agent=a1", "-x", "a1", "--cache-dir", tmp_path / "cache",
               "-o", tmp_path / "t.parquet", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "source_context" in pq.read_schema(tmp_path / "t.parquet").names
    assert Params.load(DEFAULT_PARAMS, missing="defaults").sample == Params.load(REPO / "params.yaml").sample


# ---- issue 73 note: calibration results of another store ----------------------------------------


def test_calibration_results_of_another_store_are_refused(tmp_path):
    """--calibration takes the store's own agents' leave-one-agent-out results. Results of another
    store (here: the same agents, other dialogues, as two seeds of the simulator give) were used
    silently; each result records the digest of the experience it was made on (the first part of
    its fingerprint), which must be this store's without that agent."""
    a = T.write_tiny_store(tmp_path / "a", n_dialogues=6)
    b = T.write_tiny_store(tmp_path / "b", n_dialogues=8)
    params = _params_with(tmp_path, **{"estimators.enigma.dice.interval_resamples": 0})
    common = ["--encoder", "onehot", "--cache-dir", tmp_path / "cache", "--no-progress", "--params", params]
    r = enigma("estimate", "-e", a, "-t", f"a1={ECHO}", "-t", f"a2={ECHO}", "-o", tmp_path / "calib", *common)
    assert r.exit_code in (0, 3), r.output
    own = enigma("estimate", "-e", a, "-t", f"t={ECHO}", "-o", tmp_path / "own", "--calibration", tmp_path / "calib" / "results", *common)
    assert own.exit_code in (0, 3) and "error: --calibration" not in own.output, own.output
    other = enigma("estimate", "-e", b, "-t", f"t={ECHO}", "-o", tmp_path / "other", "--calibration",
                   tmp_path / "calib" / "results", *common)
    assert other.exit_code == 2, other.output
    line = error_line(other.output)
    assert line.startswith(f"error: --calibration {tmp_path / 'calib' / 'results'}: its results were made on another store "
                           f"than {b} (agent a1: "), line
    assert not (tmp_path / "other").exists()  # refused before any work
    # a result that records no digest (a fingerprint of another form) cannot be checked: a warning
    saved = tmp_path / "calib" / "results" / "enigma" / "a1.json"
    saved.write_text(json.dumps({**json.loads(saved.read_text()), "fingerprint": "written-before"}))
    again = subprocess.run(ENIGMA + [str(x) for x in ["estimate", "-e", b, "-t", f"t={ECHO}", "-o", tmp_path / "again",
                                                       "--calibration", tmp_path / "calib" / "results", *common]],
                           env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "(agent a2: " in error_line(again.stderr)  # a2's still tells
    assert f"warning: --calibration {tmp_path / 'calib' / 'results'}: 1 result(s) (a1) record no digest" in again.stderr


# ---- issue 73 note: an input inside the store it would replace -------------------------------------


@pytest.mark.parametrize("where", ["file", "folder"])
def test_an_input_inside_the_store_it_replaces_is_refused_before_any_work(where, inputs, tmp_path):
    """ingest replaces --out whole: an input kept inside it was deleted with the old store."""
    out = tmp_path / "store"
    scales = ["--scale", "match=0:1", "--scale", "short=0:1", "--no-progress", "--params", REPO / "params.yaml"]
    assert enigma("ingest", "jsonl", inputs["jsonl"], "--out", out, *scales).exit_code == 0
    (out / "raw").mkdir()
    kept = out / "raw" / "in.jsonl"
    kept.write_bytes(inputs["jsonl"].read_bytes())
    given = kept if where == "file" else out / "raw"
    before = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    r = enigma("ingest", "jsonl", given, "--out", out, *scales)
    assert r.exit_code == 2, r.output
    assert error_line(r.output) == (f"error: {given}: the input is inside --out {out}, which ingest replaces whole (the input "
                                    "would be deleted with the old store); move it out of the store first")
    assert kept.read_bytes() == inputs["jsonl"].read_bytes()
    assert {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()} == before


def test_a_store_read_back_in_place_is_rewritten(inputs, tmp_path):
    out = tmp_path / "store"
    assert enigma("ingest", "jsonl", inputs["jsonl"], "--out", out, "--scale", "match=0:1", "--scale", "short=0:1",
                  "--no-progress", "--params", REPO / "params.yaml").exit_code == 0
    r = enigma("ingest", "parquet", out, "--out", out, "--no-progress", "--params", REPO / "params.yaml")
    assert r.exit_code == 0, r.output
    assert pq.read_table(out / "dialogues.parquet").num_rows == 20


def test_an_embedding_cache_on_a_full_disk_is_one_error_line(store, tmp_path, full_disk):
    """The frozen encoder's sentence vectors go to <cache-dir>/embeddings: on a full disk that was
    an OSError traceback too. (The replies are sampled into the cache first, so the vectors are the
    first thing written.)"""
    cache = full_disk.dir / "cache"
    argv = ["estimate", "-e", store, "-t", f"t={ECHO}", "--cache-dir", cache, "--no-progress",
            "--params", _params_with(tmp_path, **{"estimators.enigma.dice.interval_resamples": 0})]
    assert full_disk.run(*argv, "--encoder", "onehot", "-o", tmp_path / "first").returncode in (0, 3)
    full_disk.fill()
    _disk_error(full_disk.run(*argv, "--encoder", "frozen", "-o", tmp_path / "out"), cache / "embeddings")
    assert [p for p in (cache / "embeddings").rglob("*") if p.is_file() and p.name != "settings.json"] == []
    assert not (tmp_path / "out" / "estimates.json").exists()
