"""Compiled kernels that index tf.train.Example bytes: for every record and every spec key,
where that key's list is. The mirror of wire.example_write; wire.example_read then reads each key's
lists into a column, and arrow.decode drives both.

Wire format read (any field order, unknown fields skipped, a later entry for a key wins)::

    Example   = field 1 (len) Features
    Features  = repeated field 1 (len) Entry          # map<string, Feature>
    Entry     = field 1 (len) key, field 2 (len) Feature
    Feature   = one of 1 BytesList / 2 FloatList / 3 Int64List (len); the last one wins
    BytesList = repeated field 1 (len) bytes
    FloatList = field 1 packed (len, float32 LE)* or unpacked (fixed32), or both, repeated
    Int64List = field 1 packed (len, varint)* or unpacked (varint), or both, repeated

The kernels never trust a length: every varint, length and range is checked against the end of
its enclosing message, and a problem comes back as an error code with the record and byte
position (numba does not bounds-check, so a bad length would otherwise read past the buffer).
A record's list for each spec key is found once (`index_records`: the key expected next, else
a hash table).
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.protobuf import (
    BYTES,
    FEATURE_LISTS,
    FLOAT,
    INT,
    MALFORMED,
    NONE,
    OK,
    get_varint,
    map_entry,
    next_field,
    varint_of_length,
)
from tfspark.wire.words import SLACK, copy_bytes, load_u64
from tfspark.wire.words import unsigned as _U

# ---------------------------------------------------------------- key lookup

@njit
def key_hash(buf, start, end):
    """The djb2 hash of the key bytes buf[start:end] (the index_records lookup table's hash)."""
    h = np.int64(5381)
    for k in range(start, end):
        h = h * 33 + np.int64(buf[k])
    return h


@njit
def lookup_key(buf, ks, ke, keys, key_offsets, table):
    """Index of the key buf[ks:ke] in keys, or -1 (an open-addressing table of index + 1)."""
    mask = table.shape[0] - 1
    slot = key_hash(buf, ks, ke) & mask
    n = ke - ks
    while table[slot] != 0:
        k = table[slot] - 1
        a = key_offsets[k]
        if key_offsets[k + 1] - a == n:
            same = True
            for j in range(n):
                if keys[a + j] != buf[ks + j]:
                    same = False
                    break
            if same:
                return k
        slot = (slot + 1) & mask
    return -1


@njit
def index_records(buf, offsets, head, tail, keys, key_offsets, table, kinds, starts, ends,
                  unknown, sequence, int_row, ints, ivalid, float_row, float_bits, fvalid,
                  str_row, spans, svalid, sbytes, sfill):
    """For record i and key k: kinds[i, k] = the kind of its list (NONE for a Feature without
    one; left at -1 when the record has no such key) and starts/ends = the byte range of the
    list's body (left as given where kinds is -1: read them only where it is not). unknown =
    (record, key start, key end) of the first entry whose key is not in keys (left as given
    when there is none). Returns (code, record, byte position).

    Scalar numbers are read while their record is indexed: where int_row[k] = j >= 0, key k's
    one packed int64 value into ints[j, i] (ivalid[j, i] set); where float_row[k] = j >= 0,
    its float32's bits into float_bits[j, i] (the values' uint32 view; fvalid[j, i] set);
    both when the list is the one packed field every writer makes (TensorFlow's and
    tfspark's). Any other list is left to example_read.scalars_many, which reads (and checks)
    what is not valid here. -1 for every other key (all of them: nothing read, and the outputs
    may be empty). Likewise
    str_row[k] = j >= 0 for a key of one string: where its list is one string under 128
    bytes, the string's byte range into spans[j, 2i:2i+2] (svalid[j, i] set), and its bytes
    after the ones before it in sbytes[j] (sfill[j]: how many there are; -1 once they are not
    one string per record in order: no room left, or a key twice in a record). Each row of
    sbytes ends in SLACK bytes that are never filled: strings are copied 8 bytes at a time,
    and the last word of one may reach past its end. A record where it is not (absent, or any
    other list) is left to count_values and fill_bytes.

    Numba does not inline calls to kernels this size, and a call costs more than parsing a
    field, so the layout every writer uses (one-byte tags and lengths, key before value, one
    list per Feature, keys in spec order) is parsed inline; anything else takes next_field.
    """
    nkeys = key_offsets.shape[0] - 1
    nbuf = buf.shape[0]
    stride = sbytes.shape[1]  # each string feature's row of sbytes: room, then the slack
    room = stride - SLACK
    flat = sbytes.reshape(-1)
    for i in range(offsets.shape[0] - 1):
        pos = offsets[i] + head
        e = offsets[i + 1] - tail
        guess = 0  # the key expected next: writers sort keys as the spec does
        while pos < e:
            if buf[_U(pos)] == 0x0A and pos + 2 < e and buf[_U(pos + 1)] < 0x80:  # short Features
                a = pos + 2
                b = a + np.int64(buf[_U(pos + 1)])
                if b > e:
                    return MALFORMED, i, pos
            elif (buf[_U(pos)] == 0x0A and pos + 2 < e and buf[_U(pos + 2)] < 0x80):  # < 16 KiB
                a = pos + 3
                b = a + ((np.int64(buf[_U(pos + 1)]) & 0x7F) | (np.int64(buf[_U(pos + 2)]) << 7))
                if b > e:
                    return MALFORMED, i, pos
            else:
                f, w, a, b = next_field(buf, pos, e)
                if f < 0:
                    return MALFORMED, i, pos
                if f == 2 and w == 2 and not sequence:  # feature_lists: a SequenceExample
                    return FEATURE_LISTS, i, pos
                if f != 1 or w != 2:  # not Features
                    pos = b
                    continue
            q = a
            while q < b:
                if buf[_U(q)] == 0x0A and q + 1 < b and buf[_U(q + 1)] < 0x80:  # an entry
                    a2 = q + 2
                    b2 = a2 + np.int64(buf[_U(q + 1)])
                    if b2 > b:
                        return MALFORMED, i, q
                else:
                    f2, w2, a2, b2 = next_field(buf, q, b)
                    if f2 < 0:
                        return MALFORMED, i, q
                    if f2 != 1 or w2 != 2:
                        q = b2
                        continue
                q = b2
                ks = ke = vs = ve = a2  # a missing key is "", a missing value empty
                r = a2
                if r + 1 < b2 and buf[_U(r)] == 0x0A and buf[_U(r + 1)] < 0x80:
                    ke = r + 2 + np.int64(buf[_U(r + 1)])
                    if (ke + 1 < b2 and buf[_U(ke)] == 0x12 and buf[_U(ke + 1)] < 0x80
                            and ke + 2 + np.int64(buf[_U(ke + 1)]) == b2):
                        ks, vs, ve, r = r + 2, ke + 2, b2, b2
                    else:
                        ke = a2
                if r < b2:  # not the usual layout: walk the entry's fields
                    bad, ks, ke, vs, ve = map_entry(buf, a2, b2)
                    if bad >= 0:
                        return MALFORMED, i, bad
                k = -1
                if guess < nkeys and key_offsets[guess + 1] - key_offsets[guess] == ke - ks:
                    k = guess
                    ka = key_offsets[guess]
                    for j in range(ke - ks):
                        if keys[ka + j] != buf[_U(ks + j)]:
                            k = -1
                            break
                if k < 0:
                    k = lookup_key(buf, ks, ke, keys, key_offsets, table)
                if k < 0:
                    if unknown[0] < 0:
                        unknown[0], unknown[1], unknown[2] = i, ks, ke
                    continue
                guess = k + 1
                tag = length = np.int64(0)
                if ve - vs >= 2:  # the list's tag and one-byte length
                    tag, length = np.int64(buf[_U(vs)]), np.int64(buf[_U(vs + 1)])
                if (length < 0x80 and vs + 2 + length == ve
                        and (tag == 0x0A or tag == 0x12 or tag == 0x1A)):
                    kind, la, lb = np.int64(tag >> 3), vs + 2, ve
                else:
                    kind, la, lb = list_of(buf, vs, ve)
                    if kind < 0:
                        return MALFORMED, i, la
                kinds[i, k] = kind
                starts[i, k] = la
                ends[i, k] = lb
                j = int_row[k]  # (a later entry of a key wins: it is read again)
                if j >= 0:
                    ivalid[j, i] = False
                    if kind == INT and 3 <= lb - la <= 12 and buf[_U(la)] == 0x0A and \
                            buf[_U(la + 1)] == lb - la - 2:
                        if la + 12 <= nbuf:  # (the 10 bytes it may read are there)
                            v, good = varint_of_length(buf, la + 2, lb - la - 2)
                        else:
                            v, end = get_varint(buf, la + 2, lb)
                            good = end == lb
                        if good:
                            ints[j, i] = v
                            ivalid[j, i] = True
                j = float_row[k]
                if j >= 0:
                    fvalid[j, i] = False
                    if kind == FLOAT and lb - la == 6 and la + 8 <= nbuf:
                        w = load_u64(buf, la)  # tag, length 4, the float's 4 bytes
                        if (w & np.uint64(0xFFFF)) == np.uint64(0x040A):
                            float_bits[j, i] = np.uint32(w >> np.uint64(16))
                            fvalid[j, i] = True
                    elif (kind == FLOAT and lb - la == 6 and buf[_U(la)] == 0x0A
                          and buf[_U(la + 1)] == 4):
                        bits = np.uint32(0)  # (the buffer's last bytes)
                        for m in range(4):
                            bits |= np.uint32(buf[_U(la + 2 + m)]) << np.uint32(8 * m)
                        float_bits[j, i] = bits
                        fvalid[j, i] = True
                j = str_row[k]
                if j >= 0:
                    if svalid[j, i]:  # a second entry of the key in this record
                        sfill[j] = -1
                    svalid[j, i] = False
                    if kind == BYTES and lb - la >= 2 and buf[_U(la)] == 0x0A and \
                            buf[_U(la + 1)] < 0x80 and buf[_U(la + 1)] == lb - la - 2:
                        spans[j, 2 * i] = la + 2
                        spans[j, 2 * i + 1] = lb
                        svalid[j, i] = True
                        at = sfill[j]  # (copied here, while the record is in the cache)
                        size = lb - la - 2
                        if at >= 0 and at + size <= room:  # (words: overruns in the slack)
                            copy_bytes(flat, j * stride + at, buf, la + 2, size, True)
                            sfill[j] = at + size
                        else:
                            sfill[j] = -1
            pos = b
    return OK, 0, 0


@njit
def list_of(buf, s, e):
    """(kind, start, end) of the list in a Feature message: the last of its list fields."""
    kind, a, b = NONE, s, s
    pos = s
    while pos < e:
        f, w, p, q = next_field(buf, pos, e)
        if f < 0:
            return -1, pos, pos
        if w == 2 and 1 <= f <= 3:
            kind, a, b = f, p, q
        pos = q
    return kind, a, b


def key_table(keys: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key bytes back to back, n+1 offsets, open-addressing table) for index_records."""
    raw = [k.encode("utf-8") for k in keys]
    data = np.frombuffer(b"".join(raw) or b"\0", np.uint8)
    offsets = np.cumsum([0] + [len(r) for r in raw]).astype(np.int64)
    size = 1 << max(3, (2 * len(raw)).bit_length())  # at most half full
    table = np.zeros(size, np.int64)
    for k, r in enumerate(raw):
        slot = key_hash(np.frombuffer(r or b"\0", np.uint8), 0, len(r)) & (size - 1)
        while table[slot]:
            slot = (slot + 1) & (size - 1)
        table[slot] = k + 1
    return data, offsets, table
