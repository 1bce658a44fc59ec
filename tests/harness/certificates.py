"""A throwaway certificate authority for the TLS tests, made with `openssl` in a folder of the
test's own: its CA certificate, and certificates it signs for a server (a broker) or a client,
with the host names and validity a test asks for (one already expired, one for another host).

Keys are EC (P-256): made in milliseconds, and read by OpenSSL (librdkafka, Python's ssl) and by
Kafka's PEM key stores alike (PKCS#8, `-----BEGIN PRIVATE KEY-----`). Usable without pytest.
"""
from __future__ import annotations

import ipaddress
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed (rc {done.returncode}): {done.stderr}")


def _san(hosts: tuple[str, ...]) -> str:
    def entry(host: str) -> str:
        try:
            ipaddress.ip_address(host)
            return f"IP:{host}"
        except ValueError:
            return f"DNS:{host}"
    return ",".join(map(entry, hosts))


@dataclass(frozen=True)
class Issued:
    """One certificate and its key, as PEM files; `bundle` holds both (the key first), which is
    what a Kafka PEM key store (ssl.keystore.type = PEM) reads."""

    cert: Path
    key: Path
    bundle: Path


class TestCa:
    """A CA of the test's own in `folder` (its key never leaves it). `cert` is what a client's
    ssl.ca.location, or a broker's PEM trust store, names to trust what it signs."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, folder: Path, name: str = "etl-test-ca"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.key = self.folder / f"{name}.key"
        self.cert = self.folder / f"{name}.pem"
        _openssl("req", "-x509", *KEY, "-keyout", str(self.key), "-out", str(self.cert), "-days", "2",
                 "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.folder)

    def issue(self, name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 2,
              key_password: str | None = None) -> Issued:
        """A certificate for `name`, valid for `hosts` (its subjectAltName) and `days` from now:
        a negative number makes one that expired that many days ago. With `key_password`, its
        key is encrypted (PKCS#8, AES-256) with it. Good for a server and a client alike."""
        key, csr, cert = (self.folder / f"{name}{suffix}" for suffix in (".key", ".csr", ".pem"))
        extensions = self.folder / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
        extensions.write_text("\n".join([*lines, f"subjectAltName={_san(hosts)}"] if hosts else lines) + "\n")
        _openssl("req", *KEY, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={hosts[0] if hosts else name}",
                 cwd=self.folder)
        # -days -1: notAfter a day before notBefore (now), i.e. expired, which openssl allows.
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-set_serial", f"0x{secrets.token_hex(8)}", "-days", str(days), "-extfile", str(extensions),
                 "-out", str(cert), cwd=self.folder)
        if key_password is not None:
            plain = key.with_suffix(".plain.key")
            key.rename(plain)
            _openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(plain), "-out", str(key),
                     "-passout", f"pass:{key_password}", cwd=self.folder)
            plain.unlink()
        bundle = self.folder / f"{name}.bundle.pem"
        bundle.write_text(key.read_text() + cert.read_text())
        return Issued(cert, key, bundle)
