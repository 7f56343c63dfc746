"""The two bases every output model shares: unknown keys refused, and `schema_version` on each
object a command prints on its own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sgcli import RECORD_SCHEMA_VERSION as SCHEMA_VERSION


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Versioned(_Strict):
    schema_version: str = Field(SCHEMA_VERSION, description="version of sgcli's JSON formats")
