"""Bringing a job back after a fault, with the operators' commands when this checkout has them."""
from __future__ import annotations

from pathlib import Path

from tests.harness.etl_process import EtlProcess, Finished, run_etl
from tests.harness.state import job_state, wait_for_lock_release

_COMMAND_MISSING_MARKERS = ("invalid choice", "ModuleNotFoundError", "ImportError", "No module named")


def optional_command(config: Path | str, command: str, *args: str, timeout: float = 600) -> Finished | None:
    """Run `etl <command>`; None when this version of etl has no such command (yet)."""
    result = run_etl(config, *args, command=command, timeout=timeout)
    if result.returncode != 0 and any(m in result.stderr for m in _COMMAND_MISSING_MARKERS):
        _note_missing(command, result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "")
        return None
    return result


_MISSING_NOTED: set[str] = set()  # say it once per process, not once per run


def _note_missing(command: str, why: str) -> None:
    if command not in _MISSING_NOTED:
        _MISSING_NOTED.add(command)
        print(f"[crash-harness] NOTE: `etl {command}` is not available in this checkout ({why}); "
              f"that part of the check is skipped, the rest of the oracle still runs", flush=True)


def verify_deep(config: Path | str) -> Finished | None:
    """`etl verify --config F --deep`; None when the command does not exist yet."""
    return optional_command(config, "verify", "--deep")


def recover_or_run(config: Path | str, drain: bool = True, timeout: float = 600) -> Finished:
    """Bring a job back after a fault: `etl recover` when this checkout has it (it explains the
    state and completes the open batch), else `etl run` (which resumes the open batch itself).
    With `drain`, an `etl run` follows the recover, to load what is left beyond the open batch."""
    recovered = optional_command(config, "recover", "--execute", timeout=timeout)
    if recovered is not None:
        assert recovered.returncode == 0, f"etl recover failed\n{recovered.describe()}"
        if not drain:
            return recovered
    result = run_etl(config, timeout=timeout)
    assert result.returncode == 0, f"etl run after the fault failed\n{result.describe()}"
    if recovered is not None:
        result.stdout = f"[etl recover]\n{recovered.stdout}\n[etl run]\n{result.stdout}"
        result.seconds += recovered.seconds
    return result


def kill_mid_write(config: Path | str, topic: str, zk, partition: int = 1, venv: Path | None = None,
                   env: dict | None = None, state_config: Path | str | None = None) -> None:
    """SIGKILL an `etl run` (of `venv`, with `env`, if given) while the task of `topic`'s
    `partition` writes its file (held there by a fault point), as a lost machine would; return
    once the dead run's lock is gone (a config with a short ZooKeeper session), its batch left
    open for recovery. `state_config`: the same job's config as this process can load, to read
    its state, where `config` needs a client only `venv` has (GSSAPI)."""
    run = EtlProcess(config, fault=f"writing:{partition}", action="sleep:600", env=env, venv=venv)
    run.wait_until(lambda: run.sleeping_writer(f".{topic}+{partition}+") is not None, 400,
                   f"partition {partition}'s task paused mid-write")
    assert run.kill(), run.describe()
    run.wait(60)
    run.reap()
    assert job_state(state_config or config).open_state, "the killed batch should be left open"
    wait_for_lock_release(zk, state_config or config)
