"""What a Confluent Schema Registry keeps, for its test server (schema_registry_server.py):
schemas by global id and the versions of each subject. A real registry keeps them in a Kafka
topic; this one keeps them in one JSON file, rewritten atomically after every change, so a
server stopped and started again on the same folder serves the same ids.

The rules follow Confluent's registry where a client can tell the difference:
- ids are global integers from 1 and never reused; one schema (its type, its text up to JSON
  whitespace for Avro and JSON Schema, its references) has one id in every subject;
- registering a schema a subject already holds (not deleted) returns that version again;
  otherwise the subject gets the next version, counting soft-deleted ones;
- a soft delete hides a subject's versions (`deleted=true` shows them); a permanent delete,
  refused unless the subject was soft-deleted first, forgets them and every schema no
  version uses any more;
- a schema is checked before it is stored: its references must exist, Avro must parse with
  fastavro (the referenced named types included), JSON Schema must be JSON. Protobuf is
  stored as sent, unchecked: there is no protoc here.
Not done: compatibility checks (the real default, BACKWARD, answers 409 to an incompatible
version), contexts, modes, configs, metadata, rule sets, GUIDs.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import fastavro
from fastavro.schema import SchemaParseException

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")  # the order GET /schemas/types answers


class RegistryError(Exception):
    """An answer in Confluent's error form: the HTTP status and the registry's own code."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found() -> RegistryError:
    return RegistryError(404, 40403, "Schema not found")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaText:
    """A schema as a client sends it: type, text and references (metadata and rules dropped)."""
    schema_type: str
    text: str
    references: tuple[Reference, ...]

    @classmethod
    def from_body(cls, body) -> "SchemaText":
        """From a request body or a stored entry; 422 42201 when it is not a schema at all."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str) or not body["schema"].strip():
            raise invalid_schema("the body has no schema text")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise invalid_schema(f"unknown schema type {schema_type}")
        try:
            references = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                               for r in body.get("references") or ())
        except (KeyError, TypeError, ValueError):
            raise invalid_schema("a reference needs a name, a subject and a version") from None
        return cls(schema_type, body["schema"], references)

    def body(self) -> dict:
        """As the registry answers it: no schemaType for Avro, no references when there are none."""
        body = {"schema": self.text}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [asdict(ref) for ref in self.references]
        return body

    @cached_property
    def identity(self) -> tuple:
        """What makes two registrations the same schema."""
        text = self.text
        if self.schema_type in ("AVRO", "JSON"):
            try:
                text = json.dumps(json.loads(text), separators=(",", ":"))
            except ValueError:
                pass
        return self.schema_type, text, self.references


@dataclass
class Version:
    version: int
    id: int
    deleted: bool = False


class RegistryStore:
    """Schemas and subjects, one lock around every read and change, saved after each change."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "schemas.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._schemas: dict[int, SchemaText] = {}
        self._subjects: dict[str, list[Version]] = {}
        self._next_id = 1
        if self.path.exists():
            self._load()

    # -- reads ----------------------------------------------------------------------------
    def schema(self, schema_id: int) -> SchemaText:
        with self._lock:
            if schema_id not in self._schemas:
                raise schema_not_found()
            return self._schemas[schema_id]

    def version(self, subject: str, number: int | None, deleted: bool) -> tuple[Version, SchemaText]:
        """Version `number` of `subject`, or its latest when None."""
        with self._lock:
            versions = self._visible(subject, deleted)
            found = versions[-1] if number is None else next((v for v in versions if v.version == number), None)
            if found is None:
                raise version_not_found(number)
            return found, self._schemas[found.id]

    def lookup(self, subject: str, schema: SchemaText, deleted: bool) -> tuple[Version, SchemaText]:
        """The newest version of `subject` that holds `schema`."""
        with self._lock:
            versions = self._visible(subject, deleted)
            schema_id = self._id_of(schema)
            found = next((v for v in reversed(versions) if v.id == schema_id), None)
            if found is None:
                raise schema_not_found()
            return found, self._schemas[found.id]

    def subject_names(self, deleted: bool) -> list[str]:
        with self._lock:
            return sorted(name for name, versions in self._subjects.items()
                          if any(deleted or not v.deleted for v in versions))

    def version_numbers(self, subject: str, deleted: bool) -> list[int]:
        with self._lock:
            return [v.version for v in self._visible(subject, deleted)]

    # -- changes --------------------------------------------------------------------------
    def register(self, subject: str, schema: SchemaText) -> Version:
        with self._lock:
            self._check(schema)
            versions = self._subjects.get(subject, [])
            schema_id = self._id_of(schema)
            live = next((v for v in versions if v.id == schema_id and not v.deleted), None)
            if live is not None:
                return live
            if schema_id is None:
                schema_id, self._next_id = self._next_id, self._next_id + 1
                self._schemas[schema_id] = schema
            version = Version(versions[-1].version + 1 if versions else 1, schema_id)
            self._subjects[subject] = [*versions, version]
            self._save()
            return version

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """The versions deleted: soft by default, permanent only after a soft delete."""
        with self._lock:
            versions = self._subjects.get(subject)
            if not versions:
                raise subject_not_found(subject)
            live = [v for v in versions if not v.deleted]
            if permanent and live:
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                                "permanently deleted")
            if not permanent and not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true "
                                                "to delete permanently")
            for version in live:
                version.deleted = True
            if permanent:
                del self._subjects[subject]
                used = {v.id for vs in self._subjects.values() for v in vs}
                self._schemas = {i: s for i, s in self._schemas.items() if i in used}
            self._save()
            return [v.version for v in (live or versions)]

    # -- inside the lock ------------------------------------------------------------------
    def _visible(self, subject: str, deleted: bool) -> list[Version]:
        versions = [v for v in self._subjects.get(subject, []) if deleted or not v.deleted]
        if not versions:
            raise subject_not_found(subject)
        return versions

    def _id_of(self, schema: SchemaText) -> int | None:
        identity = schema.identity
        return next((i for i, known in self._schemas.items() if known.identity == identity), None)

    def _referenced(self, ref: Reference) -> SchemaText:
        found = next((v for v in self._subjects.get(ref.subject, []) if v.version == ref.version), None)
        if found is None:
            raise invalid_schema(f"reference {ref.name!r} to {ref.subject} version {ref.version} does not exist")
        return self._schemas[found.id]

    def _check(self, schema: SchemaText) -> None:
        """422 42201 unless every reference exists and the text parses as its type (Protobuf
        is not parsed: no protoc)."""
        for ref in schema.references:
            self._referenced(ref)  # raises when missing
        if schema.schema_type == "PROTOBUF":
            return
        try:
            parsed = json.loads(schema.text)
            if schema.schema_type == "AVRO":
                named: dict = {}
                self._add_avro_named_types(schema.references, named, set())
                fastavro.parse_schema(parsed, named_schemas=named)
        except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise invalid_schema(f"{type(exc).__name__}: {exc}") from None

    def _add_avro_named_types(self, references: tuple[Reference, ...], named: dict, seen: set) -> None:
        """Into `named`, the types the references define, theirs first and each once (two
        references may share one), as fastavro wants them."""
        for ref in references:
            if (ref.subject, ref.version) not in seen:
                seen.add((ref.subject, ref.version))
                schema = self._referenced(ref)
                self._add_avro_named_types(schema.references, named, seen)
                fastavro.parse_schema(json.loads(schema.text), named_schemas=named)

    def _save(self) -> None:
        state = {"next_id": self._next_id,
                 "schemas": {str(i): s.body() for i, s in self._schemas.items()},
                 "subjects": {name: [asdict(v) for v in versions] for name, versions in self._subjects.items()}}
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    def _load(self) -> None:
        state = json.loads(self.path.read_text(encoding="utf-8"))
        self._next_id = state["next_id"]
        self._schemas = {int(i): SchemaText.from_body(body) for i, body in state["schemas"].items()}
        self._subjects = {name: [Version(**v) for v in versions] for name, versions in state["subjects"].items()}
