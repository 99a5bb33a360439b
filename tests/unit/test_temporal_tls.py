"""mTLS to Temporal: the TLSConfig `connect` passes is built from the certificate files, and the
mistakes a user can make (half a client pair, a file that cannot be read, a file that is not PEM)
are one line naming the setting, never a traceback or the key's contents."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cli_runs import cli_env, invoke_cli, one_line
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import ValidationError
from temporalio.service import TLSConfig

from shopfloor.errors import UsageError
from shopfloor.settings import Settings
from shopfloor.temporal import tls_config

pytestmark = pytest.mark.fast


def _self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A throwaway certificate and its private key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_no_files_leave_the_tls_switch_as_it_is() -> None:
    assert tls_config(Settings(temporal_tls=False)) is False
    assert tls_config(Settings(temporal_tls=True)) is True


def test_client_pair_and_ca_become_the_tls_config(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path, "client")
    ca_file, _ = _self_signed(tmp_path, "ca")
    config = tls_config(
        Settings(temporal_tls_cert_file=cert_file, temporal_tls_key_file=key_file, temporal_tls_ca_file=ca_file)
    )
    assert isinstance(config, TLSConfig)
    assert config.client_cert == cert_file.read_bytes()
    assert config.client_private_key == key_file.read_bytes()
    assert config.server_root_ca_cert == ca_file.read_bytes()


def test_any_file_turns_tls_on_even_with_the_switch_off(tmp_path: Path) -> None:
    ca_file, _ = _self_signed(tmp_path, "ca")
    config = tls_config(Settings(temporal_tls=False, temporal_tls_ca_file=ca_file))
    assert isinstance(config, TLSConfig)
    assert config.server_root_ca_cert == ca_file.read_bytes()
    assert config.client_cert is None and config.client_private_key is None  # server TLS only


@pytest.mark.parametrize(
    ("given", "missing"), [("temporal_tls_cert_file", "KEY_FILE"), ("temporal_tls_key_file", "CERT_FILE")]
)
def test_half_a_client_pair_is_a_setting_error(tmp_path: Path, given: str, missing: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**{given: tmp_path / "one.pem"})
    ((error,),) = [caught.value.errors()]
    assert error["loc"] == ("temporal_tls_key_file",)
    assert f"SHOPFLOOR_TEMPORAL_TLS_{missing} is not" in error["msg"]


def test_unreadable_or_non_pem_file_names_the_setting_not_the_contents(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path, "client")
    with pytest.raises(UsageError, match=r"cannot read SHOPFLOOR_TEMPORAL_TLS_KEY_FILE \(.*missing\.key\): No such"):
        tls_config(Settings(temporal_tls_cert_file=cert_file, temporal_tls_key_file=tmp_path / "missing.key"))
    with pytest.raises(UsageError, match=r"cannot read SHOPFLOOR_TEMPORAL_TLS_CA_FILE \(.*\): Is a directory"):
        tls_config(Settings(temporal_tls_ca_file=tmp_path))
    # A key file with the wrong contents: the message says so without echoing them.
    secret = "hunter2-private-bytes"
    wrong = tmp_path / "wrong.key"
    wrong.write_text(secret)
    with pytest.raises(UsageError) as caught:
        tls_config(Settings(temporal_tls_cert_file=cert_file, temporal_tls_key_file=wrong))
    assert "SHOPFLOOR_TEMPORAL_TLS_KEY_FILE" in str(caught.value) and "not a PEM file" in str(caught.value)
    assert secret not in str(caught.value)


def test_the_cli_reports_tls_mistakes_in_one_line(tmp_path: Path) -> None:
    cert_file, _ = _self_signed(tmp_path, "client")
    # Nothing listens there, and nothing gets that far: both mistakes stop before connecting.
    base = {"SHOPFLOOR_TEMPORAL_ADDRESS": "127.0.0.1:9", "SHOPFLOOR_DATA_DIR": str(tmp_path / "d")}
    half = invoke_cli(["setup"], cli_env(**base, SHOPFLOOR_TEMPORAL_TLS_CERT_FILE=str(cert_file)))
    assert half.returncode == 2, half
    assert "SHOPFLOOR_TEMPORAL_TLS_KEY_FILE is not" in one_line(half.stderr)
    unreadable = invoke_cli(
        ["setup"],
        cli_env(
            **base,
            SHOPFLOOR_TEMPORAL_TLS_CERT_FILE=str(cert_file),
            SHOPFLOOR_TEMPORAL_TLS_KEY_FILE=str(tmp_path / "gone.key"),
        ),
    )
    assert unreadable.returncode == 2, unreadable  # a usage error, before any connection attempt
    assert "cannot read SHOPFLOOR_TEMPORAL_TLS_KEY_FILE" in one_line(unreadable.stderr)
