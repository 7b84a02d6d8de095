#!/usr/bin/env python3
"""Opens the page of `dsv4h report html` in headless Chromium and checks that it renders: a
screenshot (a PNG of the window's size, not blank) and the DOM after parsing (the summary
table, one <svg> chart per benchmark, the regression listed first). The history is synthetic
(make_history.py, seeded). Exits 77 (skipped, saying why) where Chromium is not installed.

usage: check_html_in_chromium.py DSV4H
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH, HEIGHT = 1200, 2400
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
    if dom.count('<table id="summary">') != 1:
        fail("the summary table is missing from the DOM")
    charts = len(re.findall(r'<svg class="chart"', dom))
    sections = len(re.findall(r'<section class="benchmark"', dom))
    if charts != 3 or sections != 3:
        fail("expected 3 benchmark sections with one chart each, found %d sections and %d charts" % (sections, charts))
    polylines = len(re.findall(r"<polyline", dom))
    if polylines < 5:  # time and fraction per benchmark; the empty kernel moves no bytes
        fail("expected at least 5 plotted series, found %d" % polylines)
    rows = re.findall(r'<tr class="(\w+)" data-verdict="\w+"><td><a href="#b\d+">([^<]+)</a>', dom)
    if not rows or rows[0][0] != "slower" or "rows:3072" not in rows[0][1]:
        fail("the regression is not the first row of the summary table: %s" % rows)
    print("DOM: summary table of %d rows, first %s (%s); %d charts" % (len(rows), rows[0][1], rows[0][0], charts))


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
        check_dom(chromium(binary, work, "dump-dom", ["--dump-dom", url]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: the report renders in headless Chromium")


if __name__ == "__main__":
    main()
