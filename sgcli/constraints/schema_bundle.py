"""A JSON Schema split over files, made one document before anything compiles.

Real schemas refer to files beside them (`"$ref": "spdx.schema.json"` in CycloneDX,
`"../common/defs.json#/definitions/id"`) and to a draft's meta-schema by its URI (OpenAPI 3.0:
`http://json-schema.org/draft-04/schema#/definitions/positiveInteger`). The backends resolve
references inside one document only (xgrammar and outlines-core refuse the others), and sgcli
fetches nothing from the network. So each document a reference names is read from the disk and
inlined under the root's `$defs` (`definitions` up to draft 7), and every reference to it becomes
a JSON pointer into the bundle; backends, checks and lint all read that one document.

Where a document is looked for, by the reference resolved against its base URI:
  - a draft's meta-schema, as jsonschema ships it;
  - a file, relative to the folder of the file that refers to it: a relative reference, a `file:`
    URI, or a URI under the folder of that file's own `$id` (CycloneDX's
    `$id: http://cyclonedx.org/schema/bom-1.5.schema.json` names `spdx.schema.json` beside it).
  - a URL under a prefix the user mapped to a folder (`--ref-base URL=DIR`: `ref_bases`), also
    from a schema given inline or on stdin.
A URL's file may also be `NAME.json` where the URL ends in `NAME` (as the JSON Schema Store serves
both). Anything else, or a relative reference from a schema given inline or on stdin (no folder),
is exit 2 at the `$ref`.

The bundle keeps the text of every file as written (rewritten `$ref` values aside), the schema's
own text first, so `SourceMap` places every position of the bundle back in the file it came from.
"""

from __future__ import annotations

import json
import posixpath
import re
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from sgcli.constraints.dialect import dialect_of, meta_schema
from sgcli.constraints.jsonpos import SchemaText, locate, pointer_of, value_end, value_offsets
from sgcli.constraints.ref_bases import RefBase, mapped
from sgcli.constraints.schema_refs import Document, Reference, ref_hides_siblings, subschemas
from sgcli.constraints.source_map import SourceMap
from sgcli.constraints.spec import ConstraintSpec, Kind, check_size, parse_json
from sgcli.errors import Location, UserError

MAX_DOCUMENTS = 100  # files bundled into one schema; each is also bounded by --max-constraint-bytes
# Keywords that give a subschema an identity of its own: renamed in an inlined document, whose
# references all become pointers from the root (an `$id` left in place would rebase them, and an
# anchor could collide with one of the schema's own).
_IDENTITIES = ("$id", "id", "$anchor", "$dynamicAnchor")
_DYNAMIC = ("$dynamicRef", "$recursiveRef")


@dataclass
class _Doc:
    identity: str  # the resolved file path, or the meta-schema's URI
    origin: str | None
    text: str
    schema: object
    folder: Path | None  # where its relative references are looked for
    id_folder: str | None  # the folder of its own absolute `$id` ("http://x/schemas/")
    document: Document
    key: str | None = None  # its member in the bundle's container; None for the schema itself


class Reader(Protocol):
    """How a referenced file is read and judged: `schema_input` passes its bounded reader (the size
    limit, UTF-8, positioned JSON errors) and its meta-validation."""

    def read(self, path: str) -> tuple[str, str]:
        """(text, origin) of the file at `path`."""

    def meta_validate(self, spec: ConstraintSpec, schema, cls: type) -> None:
        """Exit 2 at the keyword where `schema` is not valid under `cls`'s draft."""


def bundle(spec: ConstraintSpec, schema, refs: list[Reference], reader: Reader) -> ConstraintSpec:
    """`spec` with every document its references name inlined (`spec` itself when they are all local)."""
    if not any(r.remote for r in refs) or not isinstance(schema, dict):
        return spec
    return _Bundler(spec, schema, reader).run()


class _Bundler:
    def __init__(self, spec: ConstraintSpec, schema: dict, reader: Reader):
        self.spec = spec
        self.reader = reader
        folder = _file_folder(spec.origin)
        identity = str((folder / Path(spec.origin).name).resolve()) if folder else f"<{spec.name}>"
        root = _Doc(identity, spec.origin, spec.text, schema, folder, _id_folder(schema), Document(schema))
        self.docs = [root]
        self.by_identity = {identity: root}
        self.dialect = _dialect(schema)
        self.targets: dict[tuple[int, int], _Doc] = {}  # (id(document), id(its remote reference)) -> document
        self.edits: dict[str, list[tuple[int, int, str]]] = {}

    def run(self) -> ConstraintSpec:
        pending = [self.docs[0]]
        while pending:  # iterative: documents that refer to more documents
            doc = pending.pop()
            offsets = value_offsets(doc.text)  # in the order they are written: the first missing file is named
            for ref in sorted(doc.document.refs, key=lambda r: offsets.get(pointer_of(r.path), 0)):
                if ref.remote:
                    target = self.targets[id(doc), id(ref)] = self._document_for(doc, ref)
                    if target.key is None and target is not self.docs[0]:
                        self._name(target)
                        pending.append(target)
        return self._assemble()

    # -- finding documents ------------------------------------------------------------------------
    def _document_for(self, doc: _Doc, ref: Reference) -> _Doc:
        uri = ref.uri.partition("#")[0]
        at = self._at(doc, ref)
        if ref.keyword != "$ref":
            raise UserError(
                f"{ref.keyword} {ref.ref!r} points outside this file; sgcli bundles files named by $ref only",
                location=at,
                hint="copy the schema it names into $defs",
            )
        if doc is self.docs[0] and ref.base != doc.document.base and mapped(uri) is None:
            raise UserError(
                f"$ref {ref.ref!r} names another file from inside a subschema with an $id of its own; "
                "sgcli bundles files named from the schema's own base only",
                location=at,
                hint="move the subschema holding it out of the embedded resource, or copy the file into $defs",
            )
        meta = meta_schema(uri)
        if meta is not None:
            own_uri, contents = meta
            found = self.by_identity.get(own_uri)
            if found is None:
                text = json.dumps(contents, indent=2, ensure_ascii=False)
                found = self._add(_Doc(own_uri, own_uri, text, contents, None, None, Document(contents)), ref, at)
            return found
        path, base = self._file_for(doc, uri, ref, at)
        if path is None:
            where = (
                "a schema given inline or on stdin has no folder to look in"
                if doc.folder is None and not urlsplit(uri).scheme
                else "sgcli reads files beside the schema, the folders --ref-base names and the drafts' "
                "meta-schemas, and fetches nothing"
            )
            raise UserError(
                f"$ref {ref.ref!r} points outside this file: {where}, so no backend could enforce it "
                "and no check could judge the output",
                location=at,
                hint=_unmapped_hint(uri),
            )
        identity = str(path.resolve()) if path.exists() else str(path)
        found = self.by_identity.get(identity)
        if found is not None:
            return found
        if not path.is_file():
            if base is not None and not base.folder.is_dir():  # a config file may name it before it is made
                raise UserError(
                    f"$ref {ref.ref!r}: --ref-base {base}: the folder {base.folder} does not exist",
                    location=at,
                    hint="DIR is the folder that holds the copies of the URL's files",
                )
            state = "is not a file" if path.exists() else "does not exist"
            if base is not None and not path.exists() and not path.name.endswith(".json"):
                state += f" (nor does {path.name}.json)"
            raise UserError(
                f"$ref {ref.ref!r} names the file {path}, which {state}",
                location=at,
                hint=f"--ref-base {base} maps that URL to the file"
                if base is not None
                else "check the path: it is read relative to the folder of the file that holds the $ref",
            )
        with _named_by(ref, at):
            text, origin = self.reader.read(str(path))
            schema = parse_json(text, origin)
            if not isinstance(schema, (dict, bool)):
                raise UserError(
                    f"a JSON Schema must be an object or a boolean, not {type(schema).__name__}",
                    location=Location(origin, 1, 1),
                )
        found = _Doc(identity, origin, text, schema, path.parent, _id_folder(schema), Document(schema))
        self._same_draft(found, ref, at)
        with _named_by(ref, at):
            self.reader.meta_validate(ConstraintSpec(Kind.JSON_SCHEMA, text, origin), schema, self.dialect)
        return self._add(found, ref, at)

    def _add(self, doc: _Doc, ref: Reference, at: Location) -> _Doc:
        if len(self.docs) > MAX_DOCUMENTS:
            raise UserError(
                f"the schema refers to more than {MAX_DOCUMENTS} files (sgcli's limit)",
                location=at,
                hint="bundle some of them into one file",
            )
        self._same_draft(doc, ref, at)
        dynamic = next((r for r in doc.document.refs if r.keyword in _DYNAMIC), None)
        if dynamic is not None:  # placed in a file the user has; a draft's meta-schema is sgcli's copy: at the $ref
            raise UserError(
                f"{doc.origin} uses {dynamic.keyword}, which sgcli does not bundle from another file",
                location=self._at(doc, dynamic) if doc.folder is not None else at,
                hint="copy the schema into $defs of the schema that refers to it",
            )
        self.docs.append(doc)
        self.by_identity[doc.identity] = doc
        return doc

    def _same_draft(self, doc: _Doc, ref: Reference, at: Location) -> None:
        dialect = _dialect(doc.schema) if isinstance(doc.schema, dict) and "$schema" in doc.schema else self.dialect
        if dialect is not self.dialect:
            raise UserError(
                f"$ref {ref.ref!r} names {doc.origin}, a {_draft(dialect)} schema, from a {_draft(self.dialect)} "
                "schema; the drafts read keywords differently, so sgcli bundles documents of one draft only",
                location=at,
                hint="write both in one draft",
            )

    def _file_for(self, doc: _Doc, uri: str, ref: Reference, at: Location) -> tuple[Path | None, RefBase | None]:
        """The file `uri` names, and the `--ref-base` that mapped it (None: the document's folder did);
        (None, None) where sgcli has no file for it. A reference written relative to its file is looked
        for beside that file first (where its author put it), a URL through `--ref-base` first; the
        other place is tried where the first holds no such file."""
        parts = urlsplit(uri)
        if parts.scheme == "file":
            return Path(url2pathname(parts.path)), None
        beside = self._beside(doc, parts)
        through = self._through_ref_base(uri, ref, at) if parts.scheme else None
        places = [(beside, None), through] if not urlsplit(ref.ref).scheme else [through, (beside, None)]
        places = [(path, base) for path, base in filter(None, places) if path is not None]
        return next((p for p in places if p[0].exists()), places[0] if places else (None, None))

    def _through_ref_base(self, uri: str, ref: Reference, at: Location) -> tuple[Path, RefBase] | None:
        found = mapped(uri)
        if found is None:
            return None
        base, path = found
        if path is None:
            raise UserError(
                f"$ref {ref.ref!r} names no file under --ref-base {base}: the rest of the URL climbs out "
                "of the folder, names the folder itself, or holds a query",
                location=at,
                hint="refer to a file under the URL prefix",
            )
        return _served_as(path), base

    @staticmethod
    def _beside(doc: _Doc, parts) -> Path | None:
        """Where a reference finds its file in the folder of the document that holds it: by a relative
        path, or by a URL under the folder of the document's own `$id`."""
        if doc.folder is None:
            return None
        if not parts.scheme and not parts.netloc:
            relative = unquote(parts.path)
            return doc.folder / relative if relative else None
        own = urlsplit(doc.id_folder or "")
        if not doc.id_folder or (own.scheme, own.netloc) != (parts.scheme, parts.netloc):
            return None
        relative = posixpath.relpath(unquote(parts.path) or "/", unquote(own.path) or "/")
        return _served_as(doc.folder / relative) if relative else None

    def _name(self, doc: _Doc) -> None:
        base = self.docs[0].folder
        try:
            name = Path(doc.origin).resolve().relative_to(base.resolve()).as_posix() if base and doc.folder else None
        except ValueError:
            name = None
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", name or Path(urlsplit(doc.origin or "").path).name or "schema")
        taken = {d.key for d in self.docs} | set(self._container_value() or {})
        key, n = name, 1
        while key in taken:
            n += 1
            key = f"{name}_{n}"
        doc.key = key

    # -- writing the bundle -----------------------------------------------------------------------
    def _container(self) -> str:
        """The root member the inlined documents go in: the draft's own, or the other where the root
        has the draft's already written (a new member then lands at the end, where no line moves)."""
        root = self.docs[0].schema
        order = ("definitions", "$defs") if ref_hides_siblings(root) else ("$defs", "definitions")
        return next((k for k in order if k not in root), order[0])

    def _container_value(self):
        value = self.docs[0].schema.get(self._container())
        return value if isinstance(value, dict) else None

    def _target(self, doc: _Doc, ref: Reference) -> str:
        """The rewritten reference: a pointer from the bundle's root."""
        if ref.remote:
            target = self.targets[id(doc), id(ref)]
            fragment = ref.uri.partition("#")[2]
            if isinstance(target.schema, bool):
                path = () if not fragment else None
            else:
                path = target.document.fragment(fragment)[1]
            if path is None:
                raise UserError(
                    f"$ref {ref.ref!r} names nothing in {target.origin}",
                    location=self._at(doc, ref),
                    hint="check the JSON pointer or anchor after '#'",
                )
        else:
            target, path = doc, ref.target_path
            if path is None:
                raise UserError(
                    f"{ref.keyword} {ref.ref!r} does not resolve inside {doc.origin}",
                    location=self._at(doc, ref),
                    hint="check the JSON pointer or anchor after '#'",
                )
        prefix = () if target.key is None else (self._container(), target.key)
        return "#" + pointer_of((*prefix, *path)).replace("%", "%25")

    def _edits(self, doc: _Doc) -> list[tuple[int, int, str]]:
        """(start, end, new text) in the document's text: its references rewritten and, in an inlined
        document, the keywords that give it identities renamed."""
        offsets = value_offsets(doc.text)
        edits = []
        for ref in doc.document.refs:
            if ref.remote or doc.key is not None:
                start = offsets[pointer_of(ref.path)]
                target = json.dumps(self._target(doc, ref), ensure_ascii=False)
                edits.append((start, value_end(doc.text, start), target))
        if doc.key is not None and isinstance(doc.schema, dict):
            stext = SchemaText(doc.text)
            for path, node in _subschema_nodes(doc.schema):
                for key in _IDENTITIES:
                    if key in node and not (key == "id" and not isinstance(node[key], str)):
                        span = stext.key_span((*path, key))
                        if span is not None:
                            edits.append((span[0], span[1], json.dumps("x-sgcli-" + key.lstrip("$"))))
            if "$schema" in doc.schema:
                span = stext.key_span(("$schema",))
                if span is not None:
                    edits.append((span[0], span[1], '"x-sgcli-schema"'))
        return sorted(edits)

    def _assemble(self) -> ConstraintSpec:
        root = self.docs[0]
        text, smap = root.text, SourceMap()
        offsets = value_offsets(text)
        container = self._container()
        existing = self._container_value() if container in root.schema else None
        if existing is not None:  # both members written: into the draft's own, before its closing brace
            close = value_end(text, offsets["/" + container.replace("~", "~0")]) - 1
            opening = "\n" if not existing else ",\n"
            closing = "\n"
        else:
            close = value_end(text, offsets[""]) - 1
            opening = (",\n" if root.schema else "\n") + f'"{container}": {{\n'
            closing = "\n}\n"
        self._copy_edited(smap, root, 0, close)
        smap.write(opening, root.origin, text, close)
        for i, doc in enumerate(d for d in self.docs if d.key is not None):
            smap.write(("" if i == 0 else ",\n") + json.dumps(doc.key) + ":\n", doc.origin, doc.text, 0)
            self._copy_edited(smap, doc, 0, len(doc.text.rstrip()))
        smap.write(closing, root.origin, text, close)
        self._copy_edited(smap, root, close, len(text))
        bundled = replace(self.spec, text=smap.text, source_map=smap)
        check_size(bundled)
        return bundled

    def _copy_edited(self, smap: SourceMap, doc: _Doc, start: int, end: int) -> None:
        edits = self.edits.get(doc.identity)
        if edits is None:
            edits = self.edits[doc.identity] = self._edits(doc)
        at = start
        for e_start, e_end, new in edits:
            if e_start < start or e_start >= end:
                continue
            smap.copy(doc.origin, doc.text, at, e_start)
            smap.write(new, doc.origin, doc.text, e_start)
            at = e_end
        smap.copy(doc.origin, doc.text, at, end)

    def _at(self, doc: _Doc, ref: Reference) -> Location:
        return Location(doc.origin, *(locate(doc.text, ref.path) or (None, None)))


@contextmanager
def _named_by(ref: Reference, at: Location):
    """An error inside a referenced file also says which `$ref` read that file."""
    try:
        yield
    except UserError as exc:
        exc.message += f" (in the file that $ref {ref.ref!r} at {at} names)"
        exc.args = (exc.message,)
        raise


def _unmapped_hint(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme and parts.netloc:
        prefix = uri[: uri.rfind("/") + 1]
        first = f"pass --ref-base {prefix}=DIR with a folder that holds a copy of what that URL serves"
    else:
        first = "save the schema it names beside this one and refer to it by a relative path"
    return first + ", or copy it into $defs and refer to it as '#/$defs/NAME'"


def _served_as(path: Path) -> Path:
    """A URL's file: `NAME` as named, else `NAME.json` beside it (the JSON Schema Store serves
    `https://json.schemastore.org/tsconfig` and `tsconfig.json` alike)."""
    if path.exists() or path.name.endswith(".json"):
        return path
    with_suffix = path.with_name(path.name + ".json")
    return with_suffix if with_suffix.is_file() else path


def _file_folder(origin: str | None) -> Path | None:
    if not origin or origin.startswith("<") or origin.startswith("-"):
        return None
    path = Path(origin)
    return path.parent if path.is_file() else None


def _id_folder(schema) -> str | None:
    """The folder of a document's own absolute `$id` (`id` in draft 4), where its siblings are named."""
    if not isinstance(schema, dict):
        return None
    own = schema.get("$id", schema.get("id"))
    if not isinstance(own, str) or not urlsplit(own).scheme:
        return None
    own = own.partition("#")[0]
    return own[: own.rfind("/") + 1] or None


def _dialect(schema):
    return dialect_of(schema).cls


def _draft(cls) -> str:
    return cls.__name__.removesuffix("Validator").replace("Draft", "draft ")


def _subschema_nodes(schema: dict):
    """(path, subschema) for every object subschema of a document, walked without recursion."""
    stack, seen = [((), schema)], set()
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield path, node
        stack.extend(((*path, *sub_path), sub) for sub_path, sub in subschemas(node))
