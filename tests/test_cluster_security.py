"""A safe cluster: `lab sweep` through a Dask scheduler on TLS (certificates made with the openssl CLI for the test),
a client without the cluster's certificates refused, bad security options and an unreachable scheduler one line and
exit 2, early."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import cli
from lab.config import ConfigError
from lab.report import execute
from lab.report.execute import connect, tls_security
from lab.sweep import sweep

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

_LEAF = """basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _authority(folder: Path, name: str) -> dict[str, Path]:
    """A private CA ``<name>-ca.pem`` and a certificate signed by it for localhost (``<name>.pem``, ``<name>.key``),
    the README's recipe."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "leaf.cnf").write_text(_LEAF)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem",
             "-days", "2", "-subj", f"/CN={name}-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", "/CN=localhost", cwd=folder)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.pem", "-CAkey", f"{name}-ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "leaf.cnf", cwd=folder)
    return {"ca": folder / f"{name}-ca.pem", "cert": folder / f"{name}.pem", "key": folder / f"{name}.key"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    return {"lab": _authority(folder, "lab"), "rogue": _authority(folder, "rogue")}


@pytest.fixture(scope="module")
def tls_scheduler(certs):
    """A local cluster whose scheduler and worker speak TLS only, with certificates of the lab's CA."""
    from distributed import LocalCluster
    from distributed.security import Security

    c = {k: str(v) for k, v in certs["lab"].items()}
    security = Security(tls_ca_file=c["ca"], tls_scheduler_cert=c["cert"], tls_scheduler_key=c["key"],
                        tls_worker_cert=c["cert"], tls_worker_key=c["key"], tls_client_cert=c["cert"],
                        tls_client_key=c["key"], require_encryption=True)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tls://", security=security,
                      dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tls://")
        yield cluster.scheduler_address


def _tls_args(files: dict[str, Path]) -> list[str]:
    return ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"])]


def test_a_sweep_runs_through_a_tls_scheduler(certs, tls_scheduler, tmp_path):
    files = certs["lab"]
    res = sweep("dam", {}, seeds=[0], profile="ci", base={"trials": 2}, scheduler=tls_scheduler,
                security=tls_security(str(files["ca"]), str(files["cert"]), str(files["key"])), out=tmp_path,
                progress=False)
    assert res.computed == 1 and not res.failures
    out = CliRunner().invoke(cli, ["sweep", "dam", "-P", "ci", "-p", "trials=2", "--seeds", "0", "--scheduler",
                                   tls_scheduler, *_tls_args(files), "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "1 points: 0 computed, 1 reused" in out.output  # the same point, reused from the API's run


def test_a_client_without_the_clusters_certificates_is_refused(certs, tls_scheduler, monkeypatch):
    monkeypatch.setattr(execute, "SCHEDULER_TIMEOUT_S", 3.0)
    rogue = certs["rogue"]
    cases = {
        "no certificates": (tls_scheduler, None),
        "another CA's certificate": (tls_scheduler, tls_security(str(rogue["ca"]), str(rogue["cert"]),
                                                                 str(rogue["key"]))),
        "the cluster's CA, a certificate of another": (tls_scheduler, tls_security(
            str(certs["lab"]["ca"]), str(rogue["cert"]), str(rogue["key"]))),
        "plain tcp": (tls_scheduler.replace("tls://", "tcp://"), None),
    }
    for case, (address, security) in cases.items():
        start = time.monotonic()
        with pytest.raises(ConfigError, match="scheduler=") as err:
            connect(address, security).close()
        assert "\n" not in str(err.value), case
        assert time.monotonic() - start < 15, case


@pytest.mark.parametrize("flag", ["--tls-ca-file", "--tls-cert", "--tls-key"])
def test_a_missing_certificate_file_is_exit_2_naming_the_option(certs, tmp_path, flag):
    args = _tls_args(certs["lab"])
    args[args.index(flag) + 1] = str(tmp_path / "missing.pem")
    for command in (["sweep", "dam", "-P", "ci", "--seeds", "0"], ["report", "dam", "-P", "ci"]):
        out = CliRunner().invoke(cli, [*command, "--scheduler", "tls://127.0.0.1:1", *args,
                                       "--out", str(tmp_path / "out")])
        assert out.exit_code == 2, out.output
        assert f"{flag}='{tmp_path / 'missing.pem'}' is not allowed; allowed: an existing PEM file" in out.output
        assert len(out.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_tls_needs_a_ca_and_a_certificate_and_a_tls_address(certs, tmp_path):
    files = certs["lab"]
    with pytest.raises(ConfigError, match="tls_ca_file=None is not allowed"):
        tls_security(None, str(files["cert"]), str(files["key"]))
    with pytest.raises(ConfigError, match="tls_cert="):
        tls_security(str(files["ca"]), str(files["key"]), None)  # a key is no certificate
    assert tls_security() is None
    with pytest.raises(ConfigError, match="allowed: a tls:// address"):
        connect("tcp://127.0.0.1:1", tls_security(str(files["ca"]), str(files["cert"]), str(files["key"])))


def test_an_unreachable_scheduler_is_one_line_and_exit_2_early(tmp_path, monkeypatch):
    monkeypatch.setattr(execute, "SCHEDULER_TIMEOUT_S", 2.0)
    start = time.monotonic()
    out = CliRunner().invoke(cli, ["sweep", "dam", "-P", "ci", "--seeds", "0", "--scheduler", "tcp://127.0.0.1:1",
                                   "--out", str(tmp_path / "out")])
    assert out.exit_code == 2, out.output
    assert "scheduler='tcp://127.0.0.1:1' is not allowed" in out.output and "Traceback" not in out.output
    assert len(out.output.strip().splitlines()) == 1 and time.monotonic() - start < 10
    assert not (tmp_path / "out" / "dam").exists()
