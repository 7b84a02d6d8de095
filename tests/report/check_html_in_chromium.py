#!/usr/bin/env python3
"""Opens the page of `dsv4h report html` in headless Chromium, in a laptop's window (1366x768),
and checks that it renders and reads: a screenshot (a PNG of the window's size, not blank); the
DOM after parsing (the device named in the heading and the counts of slower, faster and
unchanged before any table or chart; kernels and floors in tables of their own, the regression
first; one <svg> chart per benchmark, each with its noise band and dated axis); and the layout
(a copy of the page with a measuring script added, the report itself having none): nothing wider
than the window. The history is synthetic (make_history.py, seeded). Exits 77 (skipped, saying
why) where Chromium is not installed.

usage: check_html_in_chromium.py DSV4H
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH, HEIGHT = 1366, 768
# Added to a copy of the page: the window's width and the right edge of the widest table or chart.
MEASURE = """<script>
const right = Math.max(...[...document.querySelectorAll("table, svg.chart")].map(e => e.getBoundingClientRect().right));
document.body.setAttribute("data-layout", JSON.stringify({window: window.innerWidth, right: right,
                                                           scroll: document.documentElement.scrollWidth}));
</script>"""
# Offline and quiet: no sandbox (CI runs as root), no GPU, nothing fetched in the background.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def chromium(binary, work, name, extra):
    profile = tempfile.mkdtemp(prefix="profile-" + name + "-", dir=work)  # a fresh profile per run
    result = subprocess.run([binary] + FLAGS + ["--user-data-dir=" + profile] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    if result.returncode != 0:
        fail("chromium %s exited %d: %s" % (name, result.returncode, result.stderr.decode(errors="replace")[-2000:]))
    return result.stdout.decode(errors="replace")


def check_screenshot(path):
    if not os.path.exists(path):
        fail("no screenshot written")
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("the screenshot is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    if (width, height) != (WIDTH, HEIGHT):
        fail("screenshot is %dx%d, expected %dx%d" % (width, height, WIDTH, HEIGHT))
    # A blank white page of this size compresses to a few kB; tables, text and charts do not.
    if len(data) < 20000:
        fail("screenshot of %d bytes: the page looks blank" % len(data))
    print("screenshot: %dx%d, %d bytes" % (width, height, len(data)))


def check_dom(dom):
    heading = re.search(r'<h1 id="device">([^<]*)</h1>', dom)
    if not heading or "Synthetic GPU" not in heading.group(1):
        fail("the device is not named in the page's heading: %s" % (heading.group(0) if heading else "no heading"))
    counts = re.search(r'<p class="counts" id="counts">(.*?)</p>', dom)
    if not counts or not re.search(r"1 slower.*0 faster.*2 unchanged", re.sub("<[^>]+>", "", counts.group(1))):
        fail("no line of counts '1 slower, 0 faster, 2 unchanged': %s" % (counts.group(0) if counts else "none"))
    if counts.start() > min(dom.find("<table"), dom.find('<svg class="chart"')):
        fail("the counts come after a table or a chart")
    charts = len(re.findall(r'<svg class="chart"', dom))
    sections = len(re.findall(r'<section class="benchmark"', dom))
    if charts != 3 or sections != 3:
        fail("expected 3 benchmark sections with one chart each, found %d sections and %d charts" % (sections, charts))
    polylines, bands = len(re.findall(r"<polyline", dom)), len(re.findall(r'<polygon class="band"', dom))
    if polylines < 5 or bands != 3:  # time and fraction per benchmark (the empty kernel moves no bytes), a band each
        fail("expected at least 5 plotted series and 3 noise bands, found %d and %d" % (polylines, bands))
    dates = re.findall(r'<text class="date"[^>]*>([^<]*)</text>', dom)
    if len(dates) < 3 * 6 or "11-01" not in dates:
        fail("the charts' axes are not dated: %s" % dates)
    tables = {}
    for table_id in ("summary-kernels", "summary-floors"):
        table = re.search(r'<table class="summary" id="%s">(.*?)</table>' % table_id, dom, re.S)
        if not table:
            fail("no table %s" % table_id)
        tables[table_id] = re.findall(r'<tr class="(\w+)" data-verdict="\w+"><td class="name"><a href="#b\d+">([^<]+)</a>',
                                      table.group(1))
    kernels, floors = tables["summary-kernels"], tables["summary-floors"]
    if not kernels or kernels[0][0] != "slower" or "rows:3072" not in kernels[0][1]:
        fail("the regression is not the first row of the kernels' table: %s" % kernels)
    if [name for _, name in floors] != ["BM_empty_kernel/manual_time"] or len(kernels) != 2:
        fail("the empty kernel is not apart from the kernels: kernels %s, floors %s" % (kernels, floors))
    print("DOM: %s; counts first; kernels %d rows, first %s (%s); floors %d; %d charts with bands and dates"
          % (heading.group(1), len(kernels), kernels[0][1], kernels[0][0], len(floors), charts))


def check_layout(dom):
    layout = re.search(r'data-layout="([^"]*)"', dom)
    if not layout:
        fail("the measuring script left no layout")
    measured = json.loads(layout.group(1).replace("&quot;", '"'))
    if measured["window"] != WIDTH or measured["right"] > WIDTH or measured["scroll"] > WIDTH:
        fail("wider than a %dpx window: %s" % (WIDTH, measured))
    print("layout: widest table or chart ends at %dpx of %d" % (measured["right"], measured["window"]))


def main():
    dsv4h = sys.argv[1]
    binary = shutil.which("chromium")
    if not binary:
        print("SKIPPED: chromium is not installed (ci/install-deps installs Debian's chromium)")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="dsv4h-html-")
    try:
        history, page, shot = os.path.join(work, "history"), os.path.join(work, "report.html"), os.path.join(work, "shot.png")
        subprocess.run([sys.executable, os.path.join(HERE, "make_history.py"), history], check=True)
        subprocess.run([dsv4h, "report", "html", "--history", history, "--out", page], check=True)
        url = "file://" + page
        chromium(binary, work, "screenshot", ["--window-size=%d,%d" % (WIDTH, HEIGHT), "--screenshot=" + shot, url])
        check_screenshot(shot)
        check_dom(chromium(binary, work, "dump-dom", ["--window-size=%d,%d" % (WIDTH, HEIGHT), "--dump-dom", url]))
        measured = os.path.join(work, "measured.html")
        with open(page) as f, open(measured, "w") as out:
            out.write(f.read().replace("</body>", MEASURE + "</body>"))
        check_layout(chromium(binary, work, "measure", ["--window-size=%d,%d" % (WIDTH, HEIGHT), "--dump-dom",
                                                        "file://" + measured]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: the report renders in headless Chromium")


if __name__ == "__main__":
    main()
