"""[schema_registry] and the decoders that read writer schemas: which decoder needs which
section, the client's own keys and secret files, and every mistake exiting 2 naming the key
(the Schema Registry client judges its settings without connecting anywhere)."""
import json
import pickle

import pytest

from etl.config import DecoderKind, load_config
from etl.errors import ConfigError
from tests.harness.config_file import minimal_ini
from tests.harness.registry_payloads import AVRO_V1


@pytest.fixture
def write(tmp_path, request):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"

    def make(decoder="avro", job="", registry="[schema_registry]\nurl = http://127.0.0.1:8081"):
        path = tmp_path / "job.ini"
        path.write_text(minimal_ini(schema, job=f"decoder = {decoder}\n{job}", sections=registry))
        return path
    return make


def test_avro_with_a_registry_gets_the_client_settings_with_its_retries_off(write):
    config = load_config(write(registry="[schema_registry]\nurl = http://r1:8081, http://r2:8081\ntimeout_seconds = 3"))
    assert config.job.decoder is DecoderKind.AVRO
    assert dict(config.schema_registry.client) == {"url": "http://r1:8081,http://r2:8081", "max.retries": 0,
                                                   "timeout": 3.0}


@pytest.mark.parametrize("decoder", ["avro", "protobuf"])
def test_a_schema_reading_decoder_without_a_registry_names_the_missing_url(write, decoder):
    with pytest.raises(ConfigError, match=rf"\[schema_registry\] url: is required with decoder = {decoder}"):
        load_config(write(decoder=decoder, registry=""))


def test_a_registry_for_the_json_decoder_is_refused(write):
    with pytest.raises(ConfigError, match=r"\[schema_registry\]: decoder = json reads no registry"):
        load_config(write(decoder="json"))


def test_plain_avro_reads_its_fixed_schema_and_refuses_a_registry_beside_it(write, tmp_path):
    (tmp_path / "event.avsc").write_text(json.dumps(AVRO_V1))
    config = load_config(write(job="avro_schema = event.avsc", registry=""))
    assert json.loads(config.job.avro_schema.text) == AVRO_V1 and config.schema_registry is None
    with pytest.raises(ConfigError, match=r"\[job\] avro_schema: set either avro_schema .* not both"):
        load_config(write(job="avro_schema = event.avsc"))
    (tmp_path / "bad.avsc").write_text('{"type": "no-such-type"}')
    with pytest.raises(ConfigError, match=r"\[job\] avro_schema: .*bad.avsc is not an Avro schema"):
        load_config(write(job="avro_schema = bad.avsc", registry=""))
    with pytest.raises(ConfigError, match=r"\[job\] avro_schema: applies only to decoder = avro"):
        load_config(write(decoder="json", job="avro_schema = event.avsc", registry=""))


def test_basic_auth_from_a_file_is_never_shown_and_reaches_the_tasks(write, tmp_path):
    (tmp_path / "registry-auth").write_text("etl:s3cr3t\n")
    config = load_config(write(registry="[schema_registry]\nurl = https://r:8081\n"
                                        "basic.auth.user.info_file = registry-auth"))
    assert config.schema_registry.client["basic.auth.user.info"] == "etl:s3cr3t"
    assert "s3cr3t" not in repr(config) and "'basic.auth.user.info': '***'" in repr(config)
    assert pickle.loads(pickle.dumps(config.schema_registry)).client["basic.auth.user.info"] == "etl:s3cr3t"


@pytest.mark.parametrize("lines, key, why", [
    ("url = ftp://r:21", "url", "is not an http:// or https:// URL"),
    ("url = http://r:1\nmax.retries = 3", "max.retries", "unknown key"),
    ("url = http://r:1\nssl.ca.location = /no/such/ca.pem", "ssl.ca.location", "does not exist"),
    ("url = http://r:1\nbasic.auth.user.info = no-colon", "basic.auth.user.info", "must be user:password"),
    ("url = http://r:1\ntimeout_seconds = 0", "timeout_seconds", "must be greater than 0"),
    ("url = http://r:1\nssl.key.location = {job}", "ssl.key.location", "client refuses it"),
])
def test_each_bad_registry_setting_exits_2_naming_its_key(write, lines, key, why):
    path = write()
    lines = lines.replace("{job}", str(path))  # a file that exists but is no key
    with pytest.raises(ConfigError, match=rf"\[schema_registry\] {key}: .*{why}"):
        load_config(write(registry=f"[schema_registry]\n{lines}"))
