"""Read Chakra execution traces (ET): one file per rank, plain or gzip.

A file is a stream of records, each a protobuf message preceded by its length as a base-128
varint (the framing of Chakra's ``protolib.encodeMessage``): first one ``GlobalMetadata``, then
``Node`` records. A trace *directory* holds one file per rank, named ``<prefix>.<rank>.et``
(ASTRA-sim's ``--workload-configuration`` convention, ``{prefix}.{npu_id}.et``), optionally
``.gz``-compressed; compression is detected from the gzip magic bytes, not from the name.

Bad input never hangs or allocates what a corrupt length claims: every length prefix is checked
against the bytes that are really left before anything is sliced, and every error is an
``InputError`` naming the file and the record (its index and byte offset, or its node id).

Quirks of real traces are warnings (``warnings.warn``), not errors: a GlobalMetadata without a
version, a file whose first record is a Node (no GlobalMetadata), file names without a rank.
"""
from __future__ import annotations

import gzip
import re
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import DecodeError

from netcosim.interop import chakra_pb2 as pb
from topo.errors import InputError

# A varint longer than 10 bytes cannot encode a 64-bit length.
_MAX_VARINT_BYTES = 10
# Limits on what one trace may inflate to (guards against decompression bombs, docs/interop.md):
# a gzip file may decompress to at most MAX_RATIO times its compressed size (beyond
# RATIO_FLOOR_BYTES; gzip'd Chakra protobuf is ~5-10x, a gzip bomb ~1000x) and to at most
# MAX_FILE_BYTES; all files of a trace together to what their parsed form can hold in memory:
# parsed nodes take about PARSED_BYTES_PER_BYTE bytes per byte of trace (measured 31 on
# 200,000 compute nodes), within netcosim.memory_guard's share of the available memory.
MAX_FILE_BYTES = 8 << 30
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 16 << 20
PARSED_BYTES_PER_BYTE = 32
_CHUNK = 16 << 20
_RANK_NAME = re.compile(r"^(?P<prefix>.*?)\.?(?P<rank>\d+)\.et(?:\.gz)?$")


class ChakraTraceError(InputError):
    """A Chakra trace that cannot be read; the message names the file and the record."""


@dataclass
class RankTrace:
    """The records of one rank's file."""

    path: str
    rank: int
    metadata: pb.GlobalMetadata
    nodes: list  # pb.Node, in file order
    offsets: list = field(default_factory=list)  # byte offset of each node record

    @property
    def version(self) -> str:
        return self.metadata.version

    def where(self, k: int) -> str:
        """'file: node id X (record k at byte b)' for error messages."""
        off = self.offsets[k] if k < len(self.offsets) else "?"
        return f"{self.path}: node id {self.nodes[k].id} (record {k + 1} at byte {off})"


# =========================================================================== framing
def _varint(data: bytes, pos: int, path: str, record: int) -> tuple[int, int]:
    """Decode the length prefix at ``pos``; returns (value, position after it)."""
    value = 0
    shift = 0
    end = min(len(data), pos + _MAX_VARINT_BYTES)
    p = pos
    while p < end:
        b = data[p]
        value |= (b & 0x7F) << shift
        p += 1
        if not b & 0x80:
            return value, p
        shift += 7
    if p - pos >= _MAX_VARINT_BYTES:
        raise ChakraTraceError(f"{path}: record {record} at byte {pos}: length prefix is not a "
                               f"valid varint (more than {_MAX_VARINT_BYTES} bytes); the file is "
                               f"corrupt or not a Chakra trace")
    raise ChakraTraceError(f"{path}: record {record} at byte {pos}: the file ends inside the "
                           f"length prefix (truncated file)")


def split_records(data: bytes, path: str = "<bytes>") -> list[tuple[int, bytes]]:
    """``[(byte offset, payload), ...]`` of a length-prefixed stream; InputError when a prefix
    claims more bytes than remain."""
    out = []
    pos = 0
    n = len(data)
    mv = memoryview(data)
    while pos < n:
        record = len(out)
        length, start = _varint(data, pos, path, record)
        if length > n - start:
            raise ChakraTraceError(f"{path}: record {record} at byte {pos}: length prefix claims "
                                   f"{length} bytes but only {n - start} remain (truncated or "
                                   f"corrupt file)")
        out.append((pos, bytes(mv[start: start + length])))
        pos = start + length
    return out


def frame(messages) -> bytes:
    """The inverse of :func:`split_records`: length-prefix every serialised message."""
    parts = []
    for m in messages:
        body = m if isinstance(m, (bytes, bytearray)) else m.SerializeToString()
        n = len(body)
        prefix = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            if n:
                prefix.append(b | 0x80)
            else:
                prefix.append(b)
                break
        parts.append(bytes(prefix))
        parts.append(bytes(body))
    return b"".join(parts)


# =========================================================================== files
def memory_budget_bytes() -> int:
    """Bytes of trace (decompressed) whose parsed form fits the memory a run may use."""
    from netcosim.memory_guard import BASE_BYTES, budget

    return max(0, budget()[0] - BASE_BYTES) // PARSED_BYTES_PER_BYTE


def _too_big(path, size: int, budget: int) -> ChakraTraceError:
    from netcosim.memory_guard import _gb

    return ChakraTraceError(
        f"{path}: the trace is {size:,} bytes (with the files before it), whose parsed nodes "
        f"need about {_gb(size * PARSED_BYTES_PER_BYTE)} of memory, but only {budget:,} bytes "
        f"of trace fit the memory available; use a smaller trace or a larger machine")


def read_bytes(path, budget: int | None = None) -> bytes:
    """The (decompressed) bytes of a trace file; at most ``budget`` bytes (default: what fits
    the memory available), and a gzip file at most MAX_RATIO times its compressed size."""
    p = Path(path)
    if not p.exists():
        raise ChakraTraceError(f"trace file {str(path)!r} does not exist")
    if p.is_dir():
        raise ChakraTraceError(f"trace file {str(path)!r} is a directory")
    budget = memory_budget_bytes() if budget is None else budget
    try:
        size = p.stat().st_size
        if size > budget:
            raise _too_big(path, size, budget)
        raw = p.read_bytes()
    except OSError as e:
        raise ChakraTraceError(f"trace file {str(path)!r}: cannot be read ({e.strerror})") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    ratio_cap = max(RATIO_FLOOR_BYTES, MAX_RATIO * len(raw))
    limit = min(MAX_FILE_BYTES, ratio_cap, budget)
    d = zlib.decompressobj(wbits=31)  # gzip framing; members after the first are handled below
    out = []
    total = 0
    buf = raw
    try:
        while buf:
            chunk = d.decompress(buf, min(_CHUNK, limit + 1 - total))
            total += len(chunk)
            out.append(chunk)
            if total > limit:
                out.clear()
                if limit == budget and budget < min(MAX_FILE_BYTES, ratio_cap):
                    raise _too_big(path, total, budget)
                why = (f"{MAX_RATIO} times its {len(raw):,} compressed bytes"
                       if limit == ratio_cap else "the per-file limit")
                raise ChakraTraceError(f"{path}: decompresses to more than {limit:,} bytes "
                                       f"({why}); refusing to read it (a decompression bomb?)")
            if d.unconsumed_tail:
                buf = d.unconsumed_tail
                continue
            if d.eof:
                buf = d.unused_data
                if buf and buf[:2] == b"\x1f\x8b":  # concatenated gzip members
                    d = zlib.decompressobj(wbits=31)
                    continue
                if buf.strip(b"\x00"):
                    raise ChakraTraceError(f"{path}: {len(buf)} bytes of garbage after the gzip "
                                           f"stream")
                break
            raise ChakraTraceError(f"{path}: the gzip stream is truncated")
    except (zlib.error, gzip.BadGzipFile, EOFError) as e:
        raise ChakraTraceError(f"{path}: corrupt gzip data ({e})") from None
    return b"".join(out)


def _is_node_record(gm: pb.GlobalMetadata) -> bool:
    """Does a record parsed as GlobalMetadata carry fields only a Node has (3..10)? Then the
    writer skipped the metadata record."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # very old runtime: cannot tell; assume the schema is followed
        return False
    return any(3 <= f.field_number <= 10 for f in UnknownFieldSet(gm))


def _looks_like_text(data: bytes) -> bool:
    """Is the start of a file text (UTF-8 without control bytes other than whitespace)? A
    Chakra trace's length prefixes and field tags are control bytes within a few bytes."""
    head = data[:4096]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not merely a character cut at the end of the sample
            return False
        text = head[:e.start].decode("utf-8")
    return bool(text.strip()) and all(c.isprintable() or c in "\t\r\n" for c in text)


def parse(data: bytes, path: str = "<bytes>", rank: int = 0) -> RankTrace:
    """Parse one rank's (decompressed) bytes. A text file (a scenario, a JSON or YAML file
    given by mistake) is said to be one: its bytes read as a record whose length runs past
    the end, "truncated or corrupt file", or even as a GlobalMetadata and nodes."""
    if _looks_like_text(data):
        raise ChakraTraceError(f"{path}: a text file, not a Chakra trace (length-prefixed "
                               f"protobuf records: a GlobalMetadata, then Nodes)")
    records = split_records(data, path)
    if not records:
        raise ChakraTraceError(f"{path}: empty trace (no GlobalMetadata, no nodes)")
    first_off, first = records[0]
    try:
        gm = pb.GlobalMetadata.FromString(first)
        is_metadata = not _is_node_record(gm)
    except DecodeError as e:
        gm, is_metadata, gm_error = None, False, e
    node_records = records[1:]
    if not is_metadata:
        # A writer that skipped the metadata record: the first record must then be a Node.
        try:
            pb.Node.FromString(first)
        except DecodeError:
            if gm is not None:  # parses as GlobalMetadata with odd extra fields: keep it so
                node_records = records[1:]
            else:
                raise ChakraTraceError(f"{path}: record 0 at byte {first_off} (GlobalMetadata): "
                                       f"not a valid protobuf message ({gm_error})") from None
        else:
            warnings.warn(f"{path}: the first record is a Node, not a GlobalMetadata; reading "
                          f"the file as nodes only", stacklevel=2)
            gm = pb.GlobalMetadata()
            node_records = records
    elif not gm.version:
        warnings.warn(f"{path}: GlobalMetadata has no version; assuming the current Chakra "
                      f"schema", stacklevel=2)
    nodes, offsets = [], []
    for k, (off, payload) in enumerate(node_records):
        try:
            nodes.append(pb.Node.FromString(payload))
        except DecodeError as e:
            idx = k + (1 if node_records is not records else 0)
            raise ChakraTraceError(f"{path}: record {idx} at byte {off} (Node): not a valid "
                                   f"protobuf message ({e})") from None
        offsets.append(off)
    return RankTrace(str(path), rank, gm, nodes, offsets)


def read_file(path, rank: int | None = None, budget: int | None = None) -> RankTrace:
    """One rank's file. ``rank`` defaults to the number in the name (``<prefix>.<rank>.et``)."""
    if rank is None:
        m = _RANK_NAME.match(Path(path).name)
        rank = int(m.group("rank")) if m else 0
    return parse(read_bytes(path, budget), str(path), rank)


def trace_files(path) -> list[tuple[int, Path]]:
    """``[(rank, file), ...]`` of a trace directory, a single file, or a list of files."""
    if isinstance(path, (list, tuple)):
        files = [Path(p) for p in path]
        return _ranked(files, f"{len(files)} trace files")
    p = Path(path)
    if not p.exists():
        raise ChakraTraceError(f"trace path {str(path)!r} does not exist")
    if p.is_file():
        m = _RANK_NAME.match(p.name)
        return [(int(m.group("rank")) if m else 0, p)]
    files = sorted(f for f in p.iterdir() if f.is_file() and
                   (f.name.endswith(".et") or f.name.endswith(".et.gz")))
    if not files:
        raise ChakraTraceError(f"trace directory {str(path)!r}: no *.et or *.et.gz files")
    return _ranked(files, f"trace directory {str(path)!r}")


def _ranked(files: list[Path], what: str) -> list[tuple[int, Path]]:
    matches = [_RANK_NAME.match(f.name) for f in files]
    if all(matches):
        ranks = [int(m.group("rank")) for m in matches]
        seen = {}
        for r, f in zip(ranks, files):
            if r in seen:
                raise ChakraTraceError(f"{what}: {seen[r].name} and {f.name} both hold rank {r}")
            seen[r] = f
        return sorted(zip(ranks, files))
    warnings.warn(f"{what}: file names do not all end in .<rank>.et; ranks follow the sorted "
                  f"file names", stacklevel=3)
    return list(enumerate(sorted(files)))


def read_trace(path) -> list[RankTrace]:
    """Every rank of a trace (directory, single file or list of files), sorted by rank."""
    budget = memory_budget_bytes()  # for all files together
    out = []
    for r, f in trace_files(path):
        data = read_bytes(f, budget)
        budget -= len(data)
        out.append(parse(data, str(f), r))
    return out


# =========================================================================== attributes
def attr_value(a: pb.AttributeProto):
    """The Python value of an attribute (a list for the *_list kinds, None when unset)."""
    which = a.WhichOneof("value")
    if which is None:
        return None
    v = getattr(a, which)
    if which.endswith("_list"):
        return list(v.values)
    return v


def attrs(msg) -> dict:
    """name -> value of a Node's or GlobalMetadata's attributes (the first one wins)."""
    out = {}
    for a in msg.attr:
        if a.name not in out:
            out[a.name] = attr_value(a)
    return out
