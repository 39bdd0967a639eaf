# sweep-compare's report: the block it writes from the saved sweep results is the one in
# docs/comparison.md (that block was written by the tool from the same files).
import os
import shutil

from longhaul_bench.commands import sweep_compare

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
BEGIN = "<!-- sweep:begin"
END = "<!-- sweep:end -->"


def block(path):
    with open(path) as f:
        text = f.read()
    return text[text.index(BEGIN):text.index(END)]


def test_report_reproduces_the_documented_block(tmp_path):
    doc = tmp_path / "comparison.md"
    shutil.copy(os.path.join(ROOT, "docs", "comparison.md"), doc)
    sweep_compare.report(os.path.join(ROOT, "docs", "comparison-data"), str(doc),
                         str(tmp_path / "comparison-"))
    assert block(doc) == block(os.path.join(ROOT, "docs", "comparison.md"))
    written = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert written == ["comparison-goodput-time.svg", "comparison-goodput-vs-loss.svg",
                       "comparison-mct-cdf.svg", "comparison-transfer.svg"]


def test_report_dates_come_from_the_sweep_runs_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "cpu-per-byte.json").write_text('{"rows": []}')
    doc = tmp_path / "doc.md"
    doc.write_text("before\n%s -->\nold\n%s\nafter\n" % (BEGIN, END))
    sweep_compare.report(str(data), str(doc), str(tmp_path / "x-"))
    text = doc.read_text()
    assert "Runs from" not in text
    assert text.startswith("before\n") and text.endswith("after\n")
