#!/usr/bin/env python3
"""Whole-program tests of the `weightlift` command.

Drives the built binary (WEIGHTLIFT_BIN) on real files in a temporary folder
(under WL_TEST_TMPDIR when set, so O_DIRECT works: tmpfs refuses it) and
checks its output against an independent reading of the same files: the
safetensors header is parsed here with the standard library and every
tensor's bytes are hashed with hashlib straight from the file.

Run one group: test_cli.py InspectTest. Exit code 77 means every test of the
run was skipped (ctest's SKIP_RETURN_CODE).
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("WEIGHTLIFT_BIN", "")
BACKENDS = ["auto", "pread", "direct", "uring", "mmap"]

# Exit codes documented in `weightlift --help`.
EXIT_USAGE, EXIT_FORMAT, EXIT_IO, EXIT_UNSUPPORTED, EXIT_NOT_FOUND = 2, 3, 4, 5, 6


def run(*args, check_rc=None, timeout=240):
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True,
                          timeout=timeout)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if check_rc is not None and proc.returncode != check_rc:
        raise AssertionError(
            f"weightlift {' '.join(map(str, args))}: exit {proc.returncode}, "
            f"wanted {check_rc}\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def binary_size(n):
    """Bytes as the command prints them: binary units, two decimals."""
    if n < 1024:
        return f"{n} B"
    v, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        v /= 1024
        if v < 1024:
            break
    return f"{v:.2f} {unit}"


def parse_file(path):
    """Independent header parse: {name: (dtype, shape, abs_offset, size)}."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], 8 + n + begin,
                         end - begin)
    return tensors, header.get("__metadata__", {})


def checkpoint_files(path):
    """The .safetensors files of a file, index or directory."""
    if os.path.isfile(path) and path.endswith(".json"):
        folder = os.path.dirname(path)
        with open(path) as f:
            wm = json.load(f)["weight_map"]
        return [os.path.join(folder, s) for s in sorted(set(wm.values()))]
    if os.path.isdir(path):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            return checkpoint_files(index)
        return sorted(os.path.join(path, p) for p in os.listdir(path)
                      if p.endswith(".safetensors"))
    return [path]


def hashlib_digests(path):
    """{tensor name: sha256 hex} read straight from the files."""
    digests = {}
    for fpath in checkpoint_files(path):
        tensors, _ = parse_file(fpath)
        with open(fpath, "rb") as f:
            for name, (_, _, offset, size) in tensors.items():
                f.seek(offset)
                data = f.read(size)
                assert len(data) == size
                digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def all_tensors(path):
    out = {}
    for fpath in checkpoint_files(path):
        tensors, _ = parse_file(fpath)
        for name, t in tensors.items():
            out[name] = (fpath,) + t
    return out


def parse_hash_lines(text):
    digests = {}
    for line in text.splitlines():
        assert not line.startswith("\\"), line  # synth names need no escape
        hexd, sep, name = line.partition("  ")
        assert sep == "  " and len(hexd) == 64, repr(line)
        assert hexd == hexd.lower()
        assert name not in digests, f"duplicate line for {name}"
        digests[name] = hexd
    return digests


def write_safetensors(path, tensors, metadata=None, data_align=8):
    """Writes {name: (dtype, shape, bytes)} in the given order, by hand; the
    header is padded so that the data starts at a multiple of DATA_ALIGN."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    hjson = json.dumps(header).encode()
    hjson += b" " * (-(8 + len(hjson)) % data_align)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)) + hjson + data)


class Fixture(unittest.TestCase):
    """A tiny one-file checkpoint and a tiny 2-shard one, made once."""

    tmp = None

    @classmethod
    def setUpClass(cls):
        if not BIN or not os.access(BIN, os.X_OK):
            raise unittest.SkipTest("WEIGHTLIFT_BIN not set to the binary")
        base = os.environ.get("WL_TEST_TMPDIR") or None
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="wl-cli-", dir=base)
        cls.single = os.path.join(cls.tmp, "single")
        cls.sharded = os.path.join(cls.tmp, "sharded")
        run("synth", "--layout", "tiny", "--seed", "7", cls.single, check_rc=0)
        run("synth", "--layout", "tiny", "--shards", "2", "--seed", "7",
            cls.sharded, check_rc=0)
        cls.single_file = os.path.join(cls.single, "model.safetensors")

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def corrupt_copy(self, name, mutate):
        """A copy of the single-file checkpoint passed through MUTATE."""
        with open(self.single_file, "rb") as f:
            data = bytearray(f.read())
        path = os.path.join(self.tmp, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(mutate(data))
        return path


def rewrite_header(data, edit):
    """Re-encodes the header after EDIT(header dict), keeping the data."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(bytes(data[8:8 + n]))
    edit(header)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(data[8 + n:])


class InspectTest(Fixture):
    def test_text_lists_every_tensor_and_totals(self):
        _, out, _ = run("inspect", self.single, check_rc=0)
        expected = all_tensors(self.single)
        for name, (_, dtype, shape, _, size) in expected.items():
            line = next((l for l in out.splitlines()
                         if l.split() and l.split()[0] == name), None)
            self.assertIsNotNone(line, f"{name} missing from:\n{out}")
            self.assertIn(dtype, line)
            self.assertIn(str(size), line)
        total = sum(t[4] for t in expected.values())
        self.assertIn(f"total: {len(expected)} tensors", out)
        self.assertIn(f"({total} B)", out)
        self.assertIn("format = pt", out)

    def test_json_matches_independent_parse(self):
        for path in (self.single, self.sharded,
                     os.path.join(self.sharded, "model.safetensors.index.json"),
                     self.single_file):
            _, out, _ = run("inspect", "--json", path, check_rc=0)
            doc = json.loads(out)
            expected = all_tensors(path)
            self.assertEqual(len(doc["tensors"]), len(expected))
            for t in doc["tensors"]:
                fpath, dtype, shape, offset, size = expected[t["name"]]
                self.assertEqual(t["dtype"], dtype)
                self.assertEqual(t["shape"], shape)
                self.assertEqual(t["offset"], offset)
                self.assertEqual(t["bytes"], size)
                self.assertEqual(os.path.realpath(
                    doc["files"][t["file"]]["resolved_path"]),
                    os.path.realpath(fpath))
            self.assertEqual(doc["totals"]["tensors"], len(expected))
            self.assertEqual(doc["totals"]["bytes"],
                             sum(t[4] for t in expected.values()))
            self.assertEqual(doc["totals"]["files"],
                             len(checkpoint_files(path)))
            self.assertEqual(doc["metadata"], {"format": "pt"})
            for f in doc["files"]:
                self.assertEqual(f["size"], os.path.getsize(f["resolved_path"]))

    def test_metadata_absent_is_null_and_empty_is_empty(self):
        tensors = {"x": ("U8", [2], b"\x01\x02")}
        for metadata, want_text in ((None, "metadata: (none: no __metadata__)"),
                                    ({}, "metadata: (empty)"),
                                    ({"k": "v"}, "  k = v")):
            with self.subTest(metadata=metadata):
                path = os.path.join(self.tmp, f"meta-{len(str(metadata))}"
                                    ".safetensors")
                write_safetensors(path, tensors, metadata)
                _, out, _ = run("inspect", "--json", path, check_rc=0)
                doc = json.loads(out)
                self.assertEqual(doc["metadata"], metadata)
                self.assertEqual(doc["files"][0]["metadata"], metadata)
                _, out, _ = run("inspect", path, check_rc=0)
                self.assertIn(want_text, out)

    def test_sharded_reports_index(self):
        _, out, _ = run("inspect", "--json", self.sharded, check_rc=0)
        doc = json.loads(out)
        self.assertTrue(doc["index"].endswith("model.safetensors.index.json"))
        self.assertEqual(len(doc["files"]), 2)
        self.assertEqual(sum(f["tensors"] for f in doc["files"]),
                         len(doc["tensors"]))


class VerifyTest(Fixture):
    def test_hash_equals_hashlib(self):
        for path in (self.single, self.sharded):
            _, out, err = run("verify", "--hash", "sha256", path, check_rc=0)
            self.assertEqual(parse_hash_lines(out), hashlib_digests(path))
            self.assertIn("OK:", err)  # summary kept off stdout

    def test_hash_with_every_backend(self):
        want = hashlib_digests(self.sharded)
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                _, out, _ = run("verify", "--hash", "sha256", "--backend",
                                backend, self.sharded, check_rc=0)
                self.assertEqual(parse_hash_lines(out), want)

    def test_hash_lines_are_in_file_order(self):
        _, out, _ = run("verify", "--hash", "sha256", self.single_file,
                        check_rc=0)
        names = [l.partition("  ")[2] for l in out.splitlines()]
        tensors = all_tensors(self.single_file)
        self.assertEqual(names, sorted(names, key=lambda n: tensors[n][3]))

    def test_without_hash_prints_summary(self):
        _, out, _ = run("verify", self.sharded, check_rc=0)
        self.assertIn("OK:", out)
        self.assertIn(f"{len(all_tensors(self.sharded))} tensors", out)

    def test_sizes_in_the_same_binary_unit_as_load(self):
        total = sum(t[4] for t in all_tensors(self.sharded).values())
        want = binary_size(total)
        _, out, _ = run("verify", self.sharded, check_rc=0)
        self.assertIn(f"tensors, {want} in 2 files", out)
        _, out, _ = run("load", self.sharded, check_rc=0)
        self.assertIn(f"tensors, {want} in", out)
        _, out, _ = run("inspect", self.sharded, check_rc=0)
        self.assertIn(f"tensors, {want} ({total} B)", out)
        for text in (out,):
            self.assertNotRegex(text, r"\d MB\b|\d GB\b|\d kB\b")

    def test_data_change_changes_only_that_digest(self):
        tensors = all_tensors(self.single_file)
        victim = max(tensors, key=lambda n: tensors[n][4])
        offset = tensors[victim][3]

        def flip(data):
            data[offset] ^= 0xFF
            return data
        path = self.corrupt_copy("flipped", flip)
        _, out, _ = run("verify", "--hash", "sha256", path, check_rc=0)
        got = parse_hash_lines(out)
        want = hashlib_digests(self.single_file)
        self.assertNotEqual(got[victim], want[victim])
        self.assertEqual(got[victim], hashlib_digests(path)[victim])
        del got[victim], want[victim]
        self.assertEqual(got, want)

    def test_odd_names_and_edge_tensors(self):
        # Names sha256sum would escape, an empty tensor and a 0-rank one.
        path = os.path.join(self.tmp, "odd.safetensors")
        tensors = {
            "plain": ("U8", [4], b"\x01\x02\x03\x04"),
            "new\nline": ("U8", [2], b"\xff\x00"),
            "back\\slash": ("I16", [1], b"\x05\x06"),
            "empty": ("F32", [0, 7], b""),
            "scalar": ("F64", [], b"\0" * 7 + b"\x40"),
            "ünïcode": ("U8", [1], b"\x2a"),
        }
        write_safetensors(path, tensors)
        _, out, _ = run("verify", "--hash", "sha256", path, check_rc=0)
        lines = out.splitlines()
        self.assertEqual(len(lines), len(tensors))
        for name, (_, _, raw) in tensors.items():
            hexd = hashlib.sha256(raw).hexdigest()
            if "\n" in name or "\\" in name:
                esc = name.replace("\\", "\\\\").replace("\n", "\\n")
                self.assertIn("\\" + hexd + "  " + esc, lines)
            else:
                self.assertIn(hexd + "  " + name, lines)
        _, out, _ = run("inspect", "--json", path, check_rc=0)
        doc = json.loads(out)
        self.assertEqual({t["name"] for t in doc["tensors"]}, set(tensors))
        _, out, _ = run("inspect", path, check_rc=0)
        self.assertIn("new\\x0aline", out)  # no raw control characters
        for backend in BACKENDS:
            run("load", path, "--backend", backend, check_rc=0)

    def test_truncated_file_fails(self):
        path = self.corrupt_copy("truncated", lambda d: d[:-100])
        rc, out, err = run("verify", path)
        self.assertEqual(rc, EXIT_FORMAT, err)
        self.assertIn(path, err)


class LoadTest(Fixture):
    def test_every_backend_json(self):
        total = sum(t[4] for t in all_tensors(self.sharded).values())
        for backend in BACKENDS:
            for cold in ([], ["--cold"]):
                with self.subTest(backend=backend, cold=cold):
                    _, out, _ = run("load", self.sharded, "--device", "cpu",
                                    "--backend", backend, "--json", *cold,
                                    check_rc=0)
                    doc = json.loads(out)
                    self.assertEqual(doc["bytes"], total)
                    self.assertEqual(doc["cold"], bool(cold))
                    self.assertEqual(len(doc["files"]), 2)
                    for f in doc["files"]:
                        self.assertTrue(f["path_taken"])
                        if backend != "auto":
                            self.assertIn(backend, f["path_taken"])
                    self.assertGreater(doc["peak_rss_bytes"], 0)

    def test_text_report(self):
        _, out, _ = run("load", self.single, "--threads", "2", "--chunk",
                        "1M", "--staging", "8MiB", check_rc=0)
        self.assertIn("GB/s", out)
        self.assertIn("model.safetensors", out)
        self.assertIn("peak RSS", out)

    def test_report_states_the_options_in_effect(self):
        _, out, _ = run("load", self.single, "--backend", "pread",
                        "--threads", "3", "--chunk", "1M", "--staging",
                        "8MiB", "--json", check_rc=0)
        opts = json.loads(out)["options"]
        self.assertEqual(opts["device"], "cpu")
        self.assertEqual(opts["backend"], "pread")
        self.assertEqual(opts["threads"], 3)
        self.assertEqual(opts["chunk"], 1 << 20)
        self.assertEqual(opts["cuda_chunk"], 1 << 20)  # one chunk knob
        self.assertEqual(opts["staging"], 8 << 20)
        self.assertEqual(opts["gds"], "auto")
        _, out, _ = run("load", self.single, "--backend", "pread",
                        "--chunk", "1M", check_rc=0)
        line = next(l for l in out.splitlines() if "options:" in l)
        self.assertIn("backend pread", line)
        self.assertIn("threads auto", line)
        self.assertIn("chunk 1.00 MiB", line)
        self.assertIn("staging 128.00 MiB", line)

    def test_size_units_have_one_meaning(self):
        for text, want in (("8M", 8 << 20), ("8MiB", 8 << 20),
                           ("8mib", 8 << 20), ("8MB", 8_000_000),
                           ("1.5M", 3 << 19), ("64k", 64 << 10),
                           ("4096", 4096), ("16KB", 16_000)):
            with self.subTest(size=text):
                _, out, _ = run("load", self.single, "--chunk", text,
                                "--json", check_rc=0)
                self.assertEqual(json.loads(out)["options"]["chunk"], want)
        rc, out, _ = run("load", "--help")
        self.assertEqual(rc, 0)
        self.assertIn("8MB = 8000000", " ".join(out.split()))

    def test_bounce_note_says_where_reads_landed(self):
        # One tensor large enough to be read straight into its destination
        # (its data page-aligned in the file) and small ones that go through
        # the bounce buffer.
        path = os.path.join(self.tmp, "mixed.safetensors")
        write_safetensors(path, {
            "big": ("U8", [4 << 20], os.urandom(4 << 20)),
            "small": ("U8", [100], os.urandom(100)),
            "tiny": ("U8", [3], b"abc"),
        }, data_align=4096)
        rc, out, err = run("load", path, "--backend", "direct", "--json")
        if rc == EXIT_UNSUPPORTED:
            self.fail(f"O_DIRECT refused in {self.tmp}: {err}")
        self.assertEqual(rc, 0, err)
        notes = " ".join(json.loads(out)["notes"])
        self.assertRegex(notes, r"\d+ reads? landed straight in the "
                                r"destination, \d+ went through the bounce "
                                r"buffer and (was|were) copied")
        self.assertNotIn("direct reads", notes)

    def test_cold_evicts(self):
        _, out, _ = run("load", self.single, "--cold", check_rc=0)
        self.assertIn("cold", out)

    def test_sizes(self):
        for size in ("4096", "64k", "1M", "1MiB", "2MB", "16m", "1.5M"):
            with self.subTest(size=size):
                run("load", self.single, "--chunk", size, check_rc=0)
        # Parsed, then refused by LoadOptions::Validate: still a usage error.
        rc, _, err = run("load", self.single, "--chunk", "1G")
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertIn("staging", err)
        for size in ("", "abc", "0", "12Q", "1.1K", "99999999999999999999"):
            with self.subTest(size=size):
                rc, _, err = run("load", self.single, "--chunk", size)
                self.assertEqual(rc, EXIT_USAGE, err)
                self.assertTrue(err.strip())


class ErrorTest(Fixture):
    def expect(self, rc_wanted, *args, needle=None):
        rc, out, err = run(*args)
        self.assertEqual(rc, rc_wanted, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertTrue(err.strip(), "no message on stderr")
        if needle is not None:
            self.assertIn(needle, err)
        return err

    def test_missing_path(self):
        missing = os.path.join(self.tmp, "does-not-exist")
        for cmd in ("inspect", "verify", "load", "bench"):
            with self.subTest(cmd=cmd):
                self.expect(EXIT_NOT_FOUND, cmd, missing, needle=missing)

    def test_directory_without_safetensors(self):
        empty = os.path.join(self.tmp, "empty-dir")
        os.makedirs(empty, exist_ok=True)
        with open(os.path.join(empty, "README"), "w") as f:
            f.write("not a checkpoint\n")
        self.expect(EXIT_NOT_FOUND, "inspect", empty, needle="safetensors")

    def test_names_from_the_checkpoint_cannot_drive_the_terminal(self):
        """A shard name with an escape sequence and a newline is refused,
        and the one-line error shows it escaped, never raw."""
        d = os.path.join(self.tmp, "escape-names")
        os.makedirs(d, exist_ok=True)
        bad = "\x1b]0;pwned\x07\x1b[2J\nx.safetensors"
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {"w": bad}}, f)
        err = self.expect(EXIT_FORMAT, "inspect", d,
                          needle="index_unsafe_path")
        self.assertNotIn("\x1b", err)
        self.assertNotIn("\x07", err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("\\x1b]0;pwned", err)

    def test_unknown_flag_and_usage(self):
        self.expect(EXIT_USAGE, "inspect", "--bogus", self.single,
                    needle="--bogus")
        self.expect(EXIT_USAGE, "frobnicate")
        self.expect(EXIT_USAGE)  # no subcommand
        self.expect(EXIT_USAGE, "inspect")  # PATH missing
        self.expect(EXIT_USAGE, "verify", "--hash", "md5", self.single)
        self.expect(EXIT_USAGE, "load", self.single, "--backend", "floppy")
        self.expect(EXIT_USAGE, "load", self.single, "--device", "tpu:0")
        self.expect(EXIT_USAGE, "load", self.single, "--threads", "-3")
        self.expect(EXIT_USAGE, "bench", self.single, "--repeat", "0")
        self.expect(EXIT_USAGE, "synth", "--layout", "nope", self.tmp)

    def test_usage_errors_are_one_line(self):
        cases = [
            (("frobnicate",), "unknown command 'frobnicate'"),
            (("frobnicate", "--json"), "unknown command 'frobnicate'"),
            ((), "no command given"),
            (("inspect",), "PATH is required"),
            (("inspect", "--bogus", self.single), "--bogus"),
            (("load", self.single, "--backend", "floppy"), "floppy"),
            (("load", self.single, "--chunk", "12Q"), "unknown unit"),
            (("load", self.single, "--device", "tpu:0"), "tpu:0"),
            (("load", self.single, "--threads", "-3"), "threads"),
            (("verify", "--hash", "md5", self.single), "md5"),
            # An empty value used to mean the default (threads auto, the
            # default cache folder) and the command ran.
            (("load", self.single, "--threads", ""), "--threads: an empty"),
            (("demo", "--cache", ""), "--cache: an empty"),
            (("load", ""), "PATH: an empty"),
            (("bench", self.single, "--mode", ""), "--mode"),
            # Group mode: its flags are checked before any file or GPU.
            (("load", self.single, "--group", "mpi"), "mpi not in {nccl}"),
            (("load", self.single, "--group", "nccl", "--group-timeout",
              "1e30"), "--group-timeout"),
            (("load", self.single, "--group", "nccl", "--group-size", "2",
              "--group-rank", "0", "--nccl-id", "/x"),
             "give --device cuda:N"),
            (("load", self.single, "--group", "nccl", "--device", "cuda:0",
              "--group-size", "2", "--group-rank", "2", "--nccl-id", "/x"),
             "rank 2 of 2"),
            (("load", self.single, "--group", "nccl", "--device", "cuda:0",
              "--group-size", "2", "--group-rank", "1"), "--nccl-id FILE"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                rc, out, err = run(*args)
                self.assertEqual(rc, EXIT_USAGE, err)
                self.assertEqual(out, "")
                lines = err.splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertTrue(lines[0].startswith("weightlift: error: "),
                                err)
                self.assertIn(needle, lines[0])
        _, _, err = run("frobnicate")
        for cmd in ("inspect", "verify", "load", "synth", "bench", "demo"):
            self.assertIn(cmd, err)

    def test_help_documents_exit_codes(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        self.assertIn("Exit codes", out)
        for code in range(7):
            self.assertRegex(out, rf"\n\s+{code}\s+\w")
        for cmd in ("inspect", "verify", "load", "synth", "bench", "demo"):
            self.assertIn(cmd, out)
            rc, sub, _ = run(cmd, "--help")
            self.assertEqual(rc, 0)
            self.assertIn("--", sub)

    def corruptions(self):
        tensors = all_tensors(self.single_file)
        first, second = sorted(tensors, key=lambda n: tensors[n][3])[:2]

        def overlap(h):
            h[second]["data_offsets"][0] -= 2
        def bad_dtype(h):
            h[first]["dtype"] = "F17"
        def bad_shape(h):
            h[first]["shape"] = [-1]
        def size_mismatch(h):
            h[first]["shape"] = h[first]["shape"] + [3]
        def bad_metadata(h):
            h["__metadata__"] = {"format": 3}
        return {
            "too_small": lambda d: d[:5],
            "header_too_large": lambda d: struct.pack("<Q", 2**40) + d[8:],
            "header_past_eof": lambda d: struct.pack("<Q", len(d)) + d[8:],
            "bad_json": lambda d: d[:8] + b"x" + d[9:],
            "truncated": lambda d: d[:-1],
            "trailing": lambda d: d + b"\0" * 16,
            "overlap": lambda d: rewrite_header(d, overlap),
            "bad_dtype": lambda d: rewrite_header(d, bad_dtype),
            "bad_shape": lambda d: rewrite_header(d, bad_shape),
            "size_mismatch": lambda d: rewrite_header(d, size_mismatch),
            "bad_metadata": lambda d: rewrite_header(d, bad_metadata),
        }

    def test_corrupt_files_exit_3(self):
        for name, mutate in self.corruptions().items():
            path = self.corrupt_copy(name, mutate)
            for cmd in (["inspect"], ["inspect", "--json"],
                        ["verify", "--hash", "sha256"], ["load"], ["bench"]):
                with self.subTest(corruption=name, cmd=cmd):
                    rc, out, err = run(*cmd, path)
                    self.assertEqual(rc, EXIT_FORMAT,
                                     f"stdout:\n{out}\nstderr:\n{err}")
                    self.assertIn("error", err)
                    self.assertIn(path, err)
                    if cmd[0] == "verify":
                        self.assertEqual(out, "")  # no digests for bad files

    def test_corrupt_index(self):
        bad = os.path.join(self.tmp, "bad-index")
        shutil.copytree(self.sharded, bad)
        index = os.path.join(bad, "model.safetensors.index.json")
        with open(index) as f:
            doc = json.load(f)
        doc["weight_map"]["ghost.weight"] = next(iter(
            doc["weight_map"].values()))
        with open(index, "w") as f:
            json.dump(doc, f)
        self.expect(EXIT_FORMAT, "inspect", bad, needle="ghost.weight")

    def test_missing_shard(self):
        bad = os.path.join(self.tmp, "missing-shard")
        shutil.copytree(self.sharded, bad)
        shard = sorted(p for p in os.listdir(bad) if p.endswith(".safetensors"))
        os.remove(os.path.join(bad, shard[-1]))
        rc, _, err = run("inspect", bad)
        self.assertIn(rc, (EXIT_FORMAT, EXIT_NOT_FOUND), err)
        self.assertIn(shard[-1], err)


class SynthTest(Fixture):
    def test_deterministic_per_seed(self):
        again = os.path.join(self.tmp, "again")
        other = os.path.join(self.tmp, "other-seed")
        _, out, _ = run("synth", "--layout", "tiny", "--seed", "7", again,
                        check_rc=0)
        self.assertIn("tiny", out)
        run("synth", "--layout", "tiny", "--seed", "8", other, check_rc=0)
        self.assertEqual(hashlib_digests(again), hashlib_digests(self.single))
        a, b = hashlib_digests(again), hashlib_digests(other)
        self.assertEqual(a.keys(), b.keys())
        self.assertNotEqual(a, b)

    def test_shards(self):
        files = checkpoint_files(self.sharded)
        self.assertEqual(len(files), 2)
        self.assertEqual(all_tensors(self.sharded).keys(),
                         all_tensors(self.single).keys())

    def test_demo_generates_once(self):
        cache = os.path.join(self.tmp, "demo-cache")
        rc, out1, err1 = run("demo", "--layout", "tiny", "--cache", cache,
                             "--device", "cpu")
        self.assertEqual(rc, 0, err1)
        self.assertIn("generated now", out1)
        self.assertIn("naive", out1)
        self.assertRegex(out1, r"weightlift is [0-9.]+x the naive loader")
        self.assertIn("GB/s", out1)
        # The sizes it checked before generating, and the measured footprint
        # against its estimate and the budget (a quarter of the memory, at
        # most what was available).
        # (Byte counts in binary units, as every command prints them.)
        self.assertRegex(err1, r"demo: tiny: [0-9.]+ [KMG]iB on disk "
                               r"\([0-9.]+ [KMGT]iB free there\), peak "
                               r"memory about [0-9.]+ [KMG]iB")
        self.assertRegex(out1, r"peak RSS [0-9.]+ [KMG]iB \(estimated "
                               r"beforehand: [0-9.]+ [KMG]iB; budget: "
                               r"[0-9.]+ [KMG]iB, a quarter of this "
                               r"machine's memory and at most what was "
                               r"available\)")
        first = {p: os.stat(os.path.join(cache, p)).st_mtime_ns
                 for p in os.listdir(cache)}
        rc, out2, err2 = run("demo", "--layout", "tiny", "--cache", cache,
                             "--device", "cpu")
        self.assertEqual(rc, 0, err2)
        self.assertIn("reused", out2)
        self.assertIn("on disk (generated earlier)", err2)
        second = {p: os.stat(os.path.join(cache, p)).st_mtime_ns
                  for p in os.listdir(cache)}
        self.assertEqual(first, second)

    def test_demo_refuses_foreign_folder(self):
        foreign = os.path.join(self.tmp, "foreign")
        os.makedirs(foreign, exist_ok=True)
        with open(os.path.join(foreign, "thesis.tex"), "w") as f:
            f.write("precious\n")
        rc, _, err = run("demo", "--layout", "tiny", "--cache", foreign,
                         "--device", "cpu")
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertTrue(os.path.exists(os.path.join(foreign, "thesis.tex")))


class BenchTest(Fixture):
    def test_table(self):
        _, out, _ = run("bench", self.sharded, "--device", "cpu", check_rc=0)
        for needle in ("cold GB/s", "warm GB/s", "weightlift loader",
                       "storage ceiling", "page-cache ceiling",
                       "naive: mmap + copy per tensor", "naive: 1 thread pread",
                       "loader / naive mmap + copy", "loader / ceiling",
                       "peak RSS", "loader paths (cold)"):
            self.assertIn(needle, out)

    def test_json_repeat(self):
        _, out, _ = run("bench", self.single, "--repeat", "2", "--json",
                        check_rc=0)
        doc = json.loads(out)
        total = sum(t[4] for t in all_tensors(self.single).values())
        self.assertEqual(doc["bytes"], total)
        ids = {(r["id"], r["mode"]) for r in doc["rows"]}
        for want in (("loader", "cold"), ("loader", "warm"),
                     ("storage_ceiling", "cold"),
                     ("page_cache_ceiling", "warm"), ("naive_mmap", "cold"),
                     ("naive_mmap", "warm"), ("naive_pread", "cold")):
            self.assertIn(want, ids)
        for r in doc["rows"]:
            self.assertEqual(len(r["seconds"]), 2)
            self.assertGreater(r["median_gbps"], 0)
            self.assertGreaterEqual(r["best_gbps"], r["median_gbps"])
        self.assertGreater(doc["ratios"]["cold"]["naive_mmap"], 0)
        self.assertGreater(doc["peak_rss_end_bytes"], 0)
        self.assertIn("cold", doc["loader_reports"])

    def test_mode_cold_only(self):
        _, out, _ = run("bench", self.single, "--mode", "cold", "--json",
                        check_rc=0)
        doc = json.loads(out)
        self.assertTrue(all(r["mode"] != "warm" for r in doc["rows"]))


class SafetensorsTest(Fixture):
    """verify --hash against the reference safetensors reader. ctest runs
    this file with the project venv's interpreter, where `make deps`
    installs safetensors and torch: their absence is a failure, not a skip."""

    def test_digests_match_safetensors(self):
        import torch
        from safetensors.torch import load_file
        for path in checkpoint_files(self.sharded):
            tensors = load_file(path)
            _, out, _ = run("verify", "--hash", "sha256", path, check_rc=0)
            got = parse_hash_lines(out)
            self.assertEqual(got.keys(), tensors.keys())
            for name, t in tensors.items():
                raw = t.contiguous().reshape(-1).view(torch.uint8).numpy()
                self.assertEqual(got[name],
                                 hashlib.sha256(raw.tobytes()).hexdigest(),
                                 name)


def main():
    names = sys.argv[1:]
    loader = unittest.defaultTestLoader
    if names:
        suite = unittest.TestSuite(
            loader.loadTestsFromName(n, sys.modules[__name__]) for n in names)
    else:
        suite = loader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        return 77
    # A class-level skip (setUpClass) counts as an error-free run of zero.
    if result.testsRun == 0 or (result.skipped and all(
            "WEIGHTLIFT_BIN" in str(r) for _, r in result.skipped)):
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
