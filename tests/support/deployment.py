"""A Flower deployment on loopback for the tests: one SuperLink and N SuperNodes as separate
processes (Flower's Deployment Runtime, HTTP on 127.0.0.1), the Sanitas app submitted with
``flwr run`` as a user would, and the processes stopped afterwards.

Everything lives under one folder: the Flower home (``FLWR_HOME``: the CLI's connection, the
installed FABs), the logs of every process, and with ``tls=True`` the certificates (a CA, the
SuperLink's certificate for 127.0.0.1) and each SuperNode's authentication key, registered with
``flwr supernode register`` before the SuperNode starts. Ports are chosen free.

Runtime dependency installation is off on both sides (``uv sync`` would reach for a package index,
and the test environment already holds the app's dependencies).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    """The Flower executable next to this interpreter (the test's environment), else on PATH."""
    local = BIN / name
    return str(local) if local.exists() else name


def write_certificates(folder: Path) -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it (PEM files in ``folder``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    # Fixed validity (no clock read in the tests): from 2000 to 2100.
    start, end = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC), datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("sanitas test CA"))
        .issuer_name(name("sanitas test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP384R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = {"ca": folder / "ca.crt", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def write_node_key(folder: Path, name: str) -> tuple[Path, Path]:
    """A SuperNode's authentication key pair (EC P-384, OpenSSH format, as ``ssh-keygen -t ecdsa -b 384``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    private, public = folder / name, folder / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    private.chmod(0o600)
    return private, public


@dataclass
class RunResult:
    """A finished deployment run: Flower's record of it and the Sanitas results folder (if written)."""

    run_id: int
    status: str  # Flower's, e.g. "finished:completed" or "finished:failed"
    details: str
    folder: Path | None


@dataclass
class Deployment:
    """A SuperLink and SuperNodes on loopback (start with :meth:`start`, stop with :meth:`stop`)."""

    root: Path
    node_configs: Sequence[str]  # one ``--node-config`` string per SuperNode
    tls: bool = False  # TLS on every connection and SuperNode authentication (registered keys)
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    nodes: list[subprocess.Popen] = field(default_factory=list)
    superlink: subprocess.Popen | None = None
    certificates: dict[str, Path] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "flwr-home"

    @property
    def connection(self) -> str:
        return "loopback"

    def _env(self) -> dict[str, str]:
        # Flower's processes start each other by name (the SuperLink starts flower-superexec): the
        # interpreter's own folder comes first on PATH, so a venv's python works without activating it.
        path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
        return {**os.environ, **self.env, "PATH": path, "FLWR_HOME": str(self.home), "FLWR_DISABLE_UPDATE_CHECK": "1"}

    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.root / log_name, "ab")  # noqa: SIM115 (closed with the process's end)
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self._env(), cwd=self.root, start_new_session=True
        )

    def log(self, name: str) -> str:
        path = self.root / name
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout: float = 60.0) -> Deployment:
        self.root.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.port = free_port()
        link = ["--insecure"]
        if self.tls:
            self.certificates = write_certificates(self.root / "certificates")
            c = self.certificates
            link = ["--ssl-ca-certfile", str(c["ca"]), "--ssl-certfile", str(c["cert"]), "--ssl-keyfile", str(c["key"])]
            link.append("--enable-supernode-auth")
        connection = {"address": f"127.0.0.1:{self.port}"}
        connection.update({"root-certificates": str(self.certificates["ca"])} if self.tls else {"insecure": True})
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{self.connection}"\n\n[superlink.{self.connection}]\n'
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in connection.items())
        )
        self.superlink = self._spawn(
            [_tool("flower-superlink"), *link, "--port", str(self.port), "--disable-runtime-dependency-installation"],
            "superlink.log",
        )
        self._wait_for("superlink.log", "Uvicorn running", timeout)
        for k, node_config in enumerate(self.node_configs):
            self.start_node(k, node_config, timeout)
        return self

    def _node_argv(self, node_config: str, private_key: Path | None) -> list[str]:
        """``flower-supernode`` towards this SuperLink: insecure, or with TLS and ``private_key``."""
        transport = ["--insecure"]
        if self.tls:
            transport = ["--root-certificates", str(self.certificates["ca"])]
            transport += ["--auth-supernode-private-key", str(private_key)]
        argv = [_tool("flower-supernode"), *transport, "--superlink", f"127.0.0.1:{self.port}"]
        return argv + ["--port", str(free_port()), "--node-config", node_config]

    def start_node(self, k: int, node_config: str, timeout: float = 60.0) -> None:
        """Start SuperNode ``k`` (with TLS: after registering its public key with the SuperLink)."""
        private = None
        if self.tls:
            private, public = write_node_key(self.root / "certificates", f"node{k}")
            self.flwr(["supernode", "register", str(public), self.connection], timeout=timeout)
        self.nodes.append(self._spawn(self._node_argv(node_config, private), f"node{k}.log"))
        self._wait_for(f"node{k}.log", "SuperNode ID", timeout)

    def unregistered_node_exit_code(self, timeout: float = 60.0) -> int | None:
        """Start a SuperNode (TLS) with a fresh key that was never registered; its exit code (None if
        it was still running after ``timeout`` seconds, i.e. not refused)."""
        private, _ = write_node_key(self.root / "certificates", "unregistered")
        proc = self._spawn(self._node_argv("partition-id=0 num-partitions=1", private), "unregistered.log")
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
            return None

    def wait_for_log(self, log_name: str, text: str, timeout: float = 60.0) -> None:
        """Wait until ``log_name`` (``superlink.log``, ``node<k>.log``) contains ``text``."""
        self._wait_for(log_name, text, timeout)

    def _wait_for(self, log_name: str, text: str, timeout: float) -> None:
        for _ in range(int(timeout / 0.2)):  # polls, not a clock: the tests read no wall clock
            if text in self.log(log_name):
                return
            procs = [p for p in (self.superlink, *self.nodes) if p is not None]
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.2)
        raise RuntimeError(f"{log_name} never printed {text!r}:\n{self.log(log_name)[-3000:]}")

    def flwr(self, args: list[str], timeout: float = 120.0) -> str:
        """Run the ``flwr`` CLI against this deployment; its stdout (raises on a non-zero exit)."""
        proc = subprocess.run(
            [_tool("flwr"), *args], env=self._env(), cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(f"flwr {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def submit(self, run_config: Path) -> int:
        """``flwr run <repo> <connection> --run-config <file>``: the run's id (it runs in the background)."""
        out = self.flwr(["run", str(REPO), self.connection, "--run-config", str(run_config), "--format", "json"])
        reply = json.loads(out[out.index("{") :])
        if not reply.get("success"):
            raise RuntimeError(f"flwr run failed: {out}")
        return int(reply["run-id"])

    def status(self, run_id: int) -> dict:
        out = self.flwr(["ls", self.connection, "--run-id", str(run_id), "--format", "json"])
        return json.loads(out[out.index("{") :])["runs"][0]

    def wait(self, run_id: int, timeout: float = 600.0, done: Path | None = None, poll: float = 15.0) -> dict:
        """Flower's record of the run once it has finished.

        Each ``flwr ls`` costs a second of CPU: Flower is asked every ``poll`` seconds, and at once
        when the file ``done`` appears (the ServerApp's last output). ``timeout`` is counted in
        sleeps of 0.25 s (the tests read no wall clock)."""
        ticks, every, written = int(timeout / 0.25), int(poll / 0.25), False
        for tick in range(ticks + 1):
            ask = tick % every == 0
            if not written and done is not None and done.exists():
                written, every, ask = True, 4, True  # written: the run ends within moments
            if ask:
                record = self.status(run_id)
                if str(record["status"]).startswith("finished"):
                    return record
            time.sleep(0.25)
        raise TimeoutError(f"run {run_id} still {record['status']} after {timeout:.0f}s")

    def run(self, config: Mapping[str, object], out_dir: Path, timeout: float = 600.0) -> RunResult:
        """Submit a run of ``config`` (TOML values) writing under ``out_dir``; wait for its end."""
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "run.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in {**config, "out-dir": str(out_dir)}.items()))
        run_id = self.submit(path)
        name = str(config.get("run-name", ""))
        record = self.wait(run_id, timeout, done=out_dir / name / "summary.json" if name else None)
        folders = sorted(p for p in out_dir.iterdir() if p.is_dir())
        return RunResult(run_id, str(record["status"]), str(record.get("status-details", "")), (folders or [None])[-1])

    def kill_node(self, k: int) -> None:
        """SIGKILL SuperNode ``k`` and whatever it started (its ClientApp process), as a power cut would."""
        proc = self.nodes[k]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        for proc in [*self.nodes, self.superlink]:
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in [*self.nodes, self.superlink]:
            if proc is None:
                continue
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
