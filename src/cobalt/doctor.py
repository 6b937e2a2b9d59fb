"""`cobalt doctor`: is this machine ready? One line per check, with the fix when it is not.

Checks: the bubblewrap sandbox runs a program; its isolation layers (seccomp,
cgroups); the Python packages of each model engine; Ray; the tokenizer
(``--tokenizer``, a local folder or a hub name); whether the Hugging Face hub
answers; and, with ``--base-url``, whether an OpenAI-compatible server
answers. Each check is a function returning a :class:`CheckResult`, so that a
command's own pre-flight can run the same ones. Exit status 1 when a required
check fails (the sandbox, or a server or tokenizer that was named), else 0;
optional parts that are missing (an engine's package, Ray) are listed as
``missing`` with the command that installs them.
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Callable

from cobalt.cli_support import positive_float

DEFAULT_TOKENIZER = "Qwen/Qwen3-8B"
SERVER_TIMEOUT_S = 10.0
ENGINE_PACKAGES = {"openai": "openai", "litellm": "litellm", "transformers": "transformers", "vllm": "vllm",
                   "vllm-serve": "vllm"}


@dataclass(frozen=True)
class CheckResult:
    """One check: its name, state (``ok``, ``FAIL`` or ``missing``), what was found, and the fix."""

    name: str
    state: str
    detail: str
    fix: str = ""
    required: bool = True

    @property
    def failed(self) -> bool:
        """A required check that did not pass."""
        return self.required and self.state != "ok"

    def line(self) -> str:
        """``name: state: detail; fix: ...``."""
        text = f"{self.name:<20} {self.state:<7} {self.detail}"
        return f"{text}; fix: {self.fix}" if self.fix and self.state != "ok" else text


def check_bubblewrap() -> CheckResult:
    """bwrap is installed and a sandbox starts (the executor's own start-up check)."""
    if shutil.which("bwrap") is None:
        return CheckResult("sandbox", "FAIL", "bubblewrap (bwrap) is not on PATH",
                           "sudo apt-get install bubblewrap (or conda install -c conda-forge bubblewrap); "
                           "--no-sandbox only for trusted code")
    from cobalt.execution import sandbox
    from cobalt.health import PreflightError, check_sandbox_ready

    try:
        version = check_sandbox_ready()  # the commands' own pre-flight check
    except PreflightError as exc:
        return CheckResult("sandbox", "FAIL", _first_line(exc).removeprefix("sandbox: "),
                           "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) "
                           "or run as root")
    mode = "root: fresh uid per sandbox" if sandbox._is_root() else "user namespace, uid 65534"
    return CheckResult("sandbox", "ok", f"{version}; pid, net, ipc, uts, mount namespaces; {mode}")


def check_seccomp() -> CheckResult:
    """The seccomp filter exists for this CPU architecture."""
    import platform

    from cobalt.execution import sandbox

    if sandbox.seccomp_program() is None:
        return CheckResult("seccomp", "missing", f"no filter for {platform.machine()}",
                           "run on x86_64 or aarch64 for the syscall filter", required=False)
    return CheckResult("seccomp", "ok", f"{len(sandbox.refused_syscalls())} syscalls refused")


def check_cgroups() -> CheckResult:
    """The cgroup bounds sandboxes get here (any cgroup as root; a delegated v2 subtree without root)."""
    from cobalt.execution import cgroups, sandbox

    root = sandbox._is_root()
    # this line names what is missing; the execution layer's once-per-process warning would repeat it
    was_disabled, cgroups.log.disabled = cgroups.log.disabled, True
    try:
        mgr = cgroups.usable_here(root)
        text = cgroups.describe(root)
    finally:
        cgroups.log.disabled = was_disabled
    missing = cgroups.missing_bounds(mgr, root)
    return CheckResult("cgroups", "ok" if mgr is not None and not missing else "missing", text,
                       "docs/SECURITY.md, 'Hosts without writable cgroups', says how to get them", required=False)


def check_engine(name: str) -> CheckResult:
    """The package an engine needs is importable."""
    package = ENGINE_PACKAGES[name]
    if importlib.util.find_spec(package) is None:
        return CheckResult(f"engine {name}", "missing", f"package {package!r} is not installed",
                           f"pip install {package}", required=False)
    return CheckResult(f"engine {name}", "ok", f"{package} {_version(package)}")


def check_ray() -> CheckResult:
    """Ray (and Ray Serve) importable, for --evaluator ray and cobalt serve."""
    if importlib.util.find_spec("ray") is None:
        return CheckResult("ray", "missing", "ray is not installed", "pip install 'ray[serve]'", required=False)
    if importlib.util.find_spec("ray.serve") is None:
        return CheckResult("ray", "missing", "ray is installed without serve", "pip install 'ray[serve]'",
                           required=False)
    return CheckResult("ray", "ok", f"ray {_version('ray')} with serve")


def check_hub() -> CheckResult:
    """Whether the Hugging Face hub answers (else commands work offline at once)."""
    from cobalt.hub import HUB_TIMEOUT_S, hub_reachable

    started = time.monotonic()
    if hub_reachable():
        return CheckResult("hub", "ok", f"reachable ({time.monotonic() - started:.1f}s)", required=False)
    return CheckResult("hub", "missing", f"unreachable within {HUB_TIMEOUT_S:g}s or HF_HUB_OFFLINE set; "
                       "commands use local paths and the cache only",
                       "pass local paths (--tokenizer PATH, --input FILE)", required=False)


def check_tokenizer(name: str, *, required: bool) -> CheckResult:
    """The tokenizer loads (local folder, or hub name: from the hub or the cache)."""
    from cobalt.hub import HubUnavailable, load_tokenizer

    try:
        tok = load_tokenizer(name, flag="--tokenizer")
    except HubUnavailable as exc:
        return CheckResult("tokenizer", "FAIL" if required else "missing", str(exc),
                           "", required=required)
    return CheckResult("tokenizer", "ok", f"{name}: {type(tok).__name__}, {len(tok)} tokens")


def check_server(base_url: str, timeout: float = SERVER_TIMEOUT_S) -> CheckResult:
    """An OpenAI-compatible server answers GET <base_url>/models with JSON within ``timeout``."""
    import json
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:
        return CheckResult("server", "FAIL", f"{url}: HTTP {exc.code}", "check --base-url and the server's log")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return CheckResult("server", "FAIL", f"{url}: {reason}", "start the server or fix --base-url")
    try:
        models = [m.get("id") for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError):
        return CheckResult("server", "FAIL", f"{url}: the server did not answer JSON",
                           "point --base-url at an OpenAI-compatible /v1 endpoint")
    return CheckResult("server", "ok", f"{url}: models {', '.join(map(str, models)) or '(none listed)'}")


def checks(args: argparse.Namespace) -> list[Callable[[], CheckResult]]:
    """The checks ``cobalt doctor`` runs for these flags, in order."""
    out: list[Callable[[], CheckResult]] = [check_bubblewrap, check_seccomp, check_cgroups]
    out += [lambda n=name: check_engine(n) for name in ("openai", "litellm", "transformers", "vllm")]
    out += [check_ray, check_hub]
    out.append(lambda: check_tokenizer(args.tokenizer, required=args.tokenizer != DEFAULT_TOKENIZER))
    if args.base_url:
        out.append(lambda: check_server(args.base_url, args.timeout))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt doctor``."""
    parser.add_argument("--tokenizer", default=DEFAULT_TOKENIZER,
                        help="tokenizer to try (local folder or hub name); a named one that fails fails the doctor")
    parser.add_argument("--base-url", default=None, help="also check this OpenAI-compatible server")
    parser.add_argument("--timeout", type=positive_float, default=SERVER_TIMEOUT_S,
                        help="seconds to wait for --base-url")


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt doctor``."""
    failed = 0
    for check in checks(args):
        try:
            result = check()
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a crash
            result = CheckResult(getattr(check, "__name__", "check"), "FAIL", _first_line(exc))
        print(result.line(), flush=True)
        failed += result.failed
    print(f"doctor: {'all required checks passed' if not failed else f'{failed} required check(s) failed'}",
          file=sys.stderr)
    return 1 if failed else 0


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "(version unknown)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
