"""Where a run's results go: results.json and the plots in the output directory, the report
beside them or, with a report directory (docs/ for --publish), benchmarks.md, benchmarks.json
and img/ there; then the ratios and where embstore is behind, on the console."""
import json
import pathlib

from harness.report.markdown import write_report
from harness.report.plots import write_plots
from harness.report.ratios import headline_ratios, where_behind
from harness.timing import log


def summarize(results):
    """Adds the headline ratios and the sentences on where embstore is behind."""
    results["ratios"] = headline_ratios(results)
    results["behind"] = where_behind(results, results["ratios"])


def publish(results, out, report_dir, phases):
    """Writes plots, results.json and the report; prints the ratios. Returns the exit status:
    1 when a phase failed."""
    out.mkdir(parents=True, exist_ok=True)
    img = pathlib.Path(report_dir) / "img" if report_dir else out
    results["plots"] = write_plots(results, img)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    if report_dir:
        report_dir = pathlib.Path(report_dir)
        (report_dir / "benchmarks.json").write_text(json.dumps(results, indent=1))
        write_report(results, report_dir / "benchmarks.md", "img", phases)
        log(f"report: {report_dir / 'benchmarks.md'}")
    else:
        write_report(results, out / "benchmarks.md", ".", phases)
    print()
    for area, desc, val, note in results["ratios"]:
        print(f"  {area:10s} {'n/a' if val is None else f'{val:8.2f}'}  {desc}  {note}")
    for sentence in results["behind"]:
        print(f"  behind: {sentence}")
    log(f"done in {results['total_seconds']:.0f} s; results in {out / 'results.json'}"
        + (f"; errors in {list(results['errors'])}" if results["errors"] else ""))
    return 1 if results["errors"] else 0
