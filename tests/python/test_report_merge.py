"""A report made of several loads (LoadReport.merge, the tensor-parallel
make_report) says each counted note once for the whole: a file read in two
parts gets one note with the runs of both, as the C++ group load's AddFiles
sums them, not one note per part with each part's numbers."""

from weightlift import _native
from weightlift._tp_common import make_report
from weightlift.report import LoadReport


def _part(runs, reads, nbytes):
    f = dict(path="/m/a.safetensors", bytes=nbytes, path_taken="pread",
             reason="buffered pread", copied_row_runs=runs,
             copied_row_reads=reads)
    d = dict(device="cpu", tensors=1, bytes=nbytes, bytes_read=nbytes,
             seconds=0.1, setup_seconds=0.0, open_seconds=0.0,
             alloc_seconds=0.0, transfer_seconds=0.1, staging_bytes=0,
             device_bytes=0, threads=1, gb_per_s=0.0, files=[f],
             counts={"slices": 1}, notes=["own note"])
    d["notes"] += _native.counted_notes(d)  # as the loader says them
    return LoadReport(d)


def _row_notes(report):
    return [n for n in report.notes if n.startswith("/m/a.safetensors:")]


def test_a_file_read_in_parts_is_said_once_with_every_parts_runs():
    parts = [_part(10, 2, 1000), _part(20, 3, 2000)]
    assert _row_notes(parts[0]) == [
        "/m/a.safetensors: 10 row runs in 2 strided reads copied from a "
        "mapping of the page cache"]
    want = ["/m/a.safetensors: 30 row runs in 5 strided reads copied from "
            "a mapping of the page cache"]
    for by_path in (False, True):
        merged = LoadReport.merge(parts, files_by_path=by_path)
        assert _row_notes(merged) == want, (by_path, merged.notes)
        assert merged.counts["slices"] == 2
        assert merged.notes.count("own note") == 2  # each load's own, kept
    tp = make_report("cpu", parts, 2, 3000, 0, 0.2, 0.0, [])
    assert _row_notes(tp) == want, tp.notes
    assert tp.bytes_read == 3000
