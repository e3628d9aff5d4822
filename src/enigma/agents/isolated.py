"""A ``python:`` agent in a process of its own (``sample.agents.python``).

The user's agent code runs in a worker process, started once per agent and reused for every
call, so that an agent that ends its process (``os._exit``, a crash in native code, the kernel's
out-of-memory killer) or hangs cannot end or stall the command that samples it: a worker that
dies, or a call not answered within ``call_timeout_s``, is ``AgentProcessLost``, an unusable
agent named by its spec (``error: agent <spec>: ...``, exit code 2). The worker is started with
the command's own interpreter and module path, loads the agent by the same code as in-process
(``load_python_agent``), and answers each call with what the agent returned or raised, so the
replies, the seeds and the agent's fingerprint are what the agent gives in the command's process.

The protocol is pickled messages over two pipes of their own: the worker's standard output goes
to standard error, so an agent that prints cannot garble it (nor the command's own output).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterator, NoReturn

from enigma.agents.errors import AgentSpecError, AgentUnavailable
from enigma.agents.spec import AgentSpec

# the worker's entry: the command's sys.path first (a test's or a notebook's additions
# included), then this module
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from enigma.agents.isolated import _worker; _worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))")


CALL_SETTING = "sample.agents.python.call_timeout_s"


class AgentProcessLost(AgentUnavailable):
    """The agent's worker process ended, or did not answer in time: the agent cannot be used.
    The sampler stops on it (it is not one failed call to record and go on from)."""


def _ended(proc: subprocess.Popen, wait_s: float = 5.0) -> str:
    try:
        code = proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return "its process stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"its process was killed by {name}"
    return f"its process ended with exit code {code}"


def _stop(proc: subprocess.Popen, conns: tuple[Connection, ...], grace_s: float) -> None:
    """Close the pipes (an idle worker then returns and exits, its agent's clean-up run); a
    worker still there after ``grace_s`` (busy: a hung call) is killed."""
    for c in conns:
        try:
            c.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL does not end
        pass


class IsolatedPythonAgent:
    """The parent's side: the agent's ``respond`` (and ``respond_at``, ``respond_with_sources``,
    ``prepare``, ``deterministic``, ``records_sources`` where the agent has them), each call sent
    to the worker and answered within ``call_timeout_s``. Calls from several threads take turns
    (one worker; ``concurrency`` is 1)."""

    concurrency = 1

    def __init__(self, spec: AgentSpec, settings) -> None:
        self.spec = spec
        self.call_timeout_s = float(settings.call_timeout_s)
        self._lock = threading.Lock()
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(p2c_r), str(c2p_w), str(os.getpid())],
                pass_fds=(p2c_r, c2p_w), stdin=subprocess.DEVNULL, close_fds=True,
            )
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self._send_conn = Connection(p2c_w, readable=False)
        self._recv_conn = Connection(c2p_r, writable=False)
        # the worker never outlives this object, nor the command (a crash of ours closes the pipes)
        self._finalizer = weakref.finalize(self, _stop, self._proc, (self._send_conn, self._recv_conn), 0.5)
        try:
            info = self._ask(("load", spec.raw), float(settings.load_timeout_s), "while loading",
                             "sample.agents.python.load_timeout_s")
        except BaseException:
            self.close()
            raise
        self.python_parts = info["parts"]  # enigma.agents.python_agent.python_fingerprint_parts, as in-process
        if info["deterministic"]:
            self.deterministic = True
        if info["records_sources"]:
            self.records_sources = True
        for method in info["methods"]:
            setattr(self, method, self._method(method))

    def _method(self, name: str):
        def call(*args, **kwargs):
            return self._call(name, args, kwargs)

        call.__name__ = name
        return call

    def respond(self, history, n: int = 1, seed: int | None = None) -> list[str]:
        return self._call("respond", (list(history),), {"n": n, "seed": seed})

    def _call(self, method: str, args: tuple, kwargs: dict) -> Any:
        with self._lock:
            self._send(("calls", [(method, args, kwargs)]))
            return self._outcome(self._receive(self.call_timeout_s, f"while answering ({method})", CALL_SETTING))

    def answers(self, requests: list[tuple[str, tuple, dict]]) -> Iterator[Callable[[], Any]]:
        """Each of ``requests`` (method, arguments, keywords), sent at once, so the worker answers
        the next while this process handles the last: in order, a function that returns what the
        agent returned or raises what it raised. Each answer has ``call_timeout_s``. A caller that
        stops early stops the worker (its later answers would come first to the next call)."""
        with self._lock:
            self._send(("calls", list(requests)))
            received = 0
            try:
                for method, _, _ in requests:
                    outcome = self._receive(self.call_timeout_s, f"while answering ({method})", CALL_SETTING)
                    received += 1
                    yield lambda outcome=outcome: self._outcome(outcome)
            finally:
                if received < len(requests):  # its later answers are still coming: no use for it
                    self.close(hung=True)

    def _ask(self, message: tuple, timeout_s: float, during: str, setting: str) -> Any:
        with self._lock:
            self._send(message)
            return self._outcome(self._receive(timeout_s, during, setting))

    def _send(self, message: tuple) -> None:
        if not self._finalizer.alive:
            raise AgentProcessLost(f"agent {self.spec.raw}: its process was stopped before")
        try:
            self._send_conn.send(message)
        except OSError as exc:  # the pipe closed: the worker is gone
            self._lost("while being asked", exc)

    def _receive(self, timeout_s: float, during: str, setting: str) -> tuple:
        try:
            if not self._recv_conn.poll(timeout_s):
                self.close(hung=True)
                raise AgentProcessLost(f"agent {self.spec.raw}: no answer within {timeout_s:g} s {during} ({setting}); "
                                       "its process was stopped")
            return self._recv_conn.recv()
        except (EOFError, OSError) as exc:  # the pipe closed: the worker is gone
            self._lost(during, exc)

    def _lost(self, during: str, exc: BaseException) -> NoReturn:
        why = _ended(self._proc)
        self.close()
        raise AgentProcessLost(f"agent {self.spec.raw}: {why} {during}, before it answered "
                               "(the agent's code ended its process, or crashed it)") from exc

    def _outcome(self, answer: tuple) -> Any:
        kind, *rest = answer
        if kind == "ok":
            return rest[0]
        if kind == "exit":  # the agent called exit(): as in-process (enigma.cli.errors.agent_exits names it)
            raise SystemExit(rest[0])
        if kind == "spec":
            raise AgentSpecError(rest[0])
        if kind == "unavailable":
            raise AgentUnavailable(rest[0])
        name, module, text, blob = rest  # the agent raised: the same exception, or one of its name and text
        exc = None
        # unpickled only where its class is loaded here already: the agent's own modules stay out of this process
        if blob is not None and module in sys.modules:
            try:
                exc = pickle.loads(blob)
            except Exception:
                exc = None
        if not isinstance(exc, BaseException):
            exc = type(name, (Exception,), {"__module__": "enigma.agents.isolated"})(text)
        raise exc

    def close(self, hung: bool = False) -> None:
        """Stop the worker (idempotent): let it end, or kill it where it ``hung`` in a call."""
        if self._finalizer.detach() is not None:
            _stop(self._proc, (self._send_conn, self._recv_conn), 0 if hung else 2.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _die_with(parent: int) -> None:
    """End this worker when the command's process ends, even one killed mid-call (the call's
    work must not go on, and its side effects land, after the command is gone)."""
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) != 0:  # PR_SET_PDEATHSIG (Linux)
            raise OSError("prctl")
    except (OSError, AttributeError):  # elsewhere: look every half second
        def watch() -> None:
            import time

            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # it ended before the above was in place
        os._exit(1)


def _worker(read_fd: int, write_fd: int, parent: int) -> None:
    """The worker: load the agent named by the first message, then answer calls until the pipe
    closes. Its standard output is its standard error; Ctrl-C is the command's to handle."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.dup2(2, 1)
    recv = Connection(read_fd, writable=False)
    send = Connection(write_fd, readable=False)
    try:
        _serve(recv, send)
    except (EOFError, OSError):  # the command closed the pipes: nothing left to answer
        return


def _serve(recv: Connection, send: Connection) -> None:
    agent = None
    while True:
        message = recv.recv()
        if message[0] == "load":  # ("load", spec)
            agent, answer = _load(message[1])
            send.send(answer)
            continue
        for method, args, kwargs in message[1]:  # ("calls", [...]): one answer each, in order
            try:
                answer = ("ok", getattr(agent, method)(*args, **kwargs))
            except SystemExit as exc:
                answer = ("exit", exc.code)
            except BaseException as exc:
                answer = _raised(exc)
            try:
                send.send(answer)
            except OSError:
                raise
            except Exception as exc:  # an answer that cannot be pickled: nothing was written
                send.send(("raised", type(exc).__name__, None, f"the agent's answer could not be sent back ({exc})", None))


def _load(raw: str) -> tuple[Any, tuple]:
    """The agent and the answer to ``("load", raw)``: what the parent needs to know of it."""
    from enigma.agents.python_agent import load_python_agent, python_fingerprint_parts
    from enigma.agents.spec import parse_spec

    try:
        spec = parse_spec(raw)
        agent = load_python_agent(spec)
        methods = [m for m in ("respond_at", "respond_with_sources", "prepare") if callable(getattr(agent, m, None))]
        return agent, ("ok", {
            "parts": python_fingerprint_parts(spec, agent),
            "deterministic": getattr(agent, "deterministic", False) is True,
            "records_sources": bool(getattr(agent, "records_sources", False)),
            "methods": methods,
        })
    except AgentSpecError as exc:
        return None, ("spec", str(exc))
    except AgentUnavailable as exc:
        return None, ("unavailable", str(exc))
    except SystemExit as exc:  # the agent's fingerprint_parts()
        return None, ("exit", exc.code)
    except BaseException as exc:
        return None, _raised(exc)


def _raised(exc: BaseException) -> tuple:
    return ("raised", type(exc).__name__, type(exc).__module__, str(exc), _pickled(exc))


def _pickled(exc: BaseException) -> bytes | None:
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
        return blob
    except Exception:
        return None
