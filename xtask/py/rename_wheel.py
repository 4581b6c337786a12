"""Renames the distribution of a wheel: `python rename_wheel.py WHEEL NEW_NAME OUT_DIR [NAME=PATH...]`.

`cargo xtask wheel` builds the FFmpeg variant of `spdl-rs` from the same pyproject.toml (maturin
takes the Python package only from inside the project's folder, so a second pyproject.toml
cannot share it) and renames it `spdl-rs-ffmpeg` here: the `.dist-info` folder, the `Name:`
line of METADATA, RECORD (paths, sha256 and sizes) and the file name; the files of the package
are unchanged. Each `NAME=PATH` adds the file PATH as `.dist-info/licenses/NAME` (PEP 639's place
for the licence texts of what the wheel bundles). Prints the new wheel's path.
"""

import base64
import hashlib
import os
import re
import sys
import zipfile


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main(wheel: str, new_name: str, out_dir: str, *licenses: str) -> None:
    old_file = os.path.basename(wheel)
    old_dist, version, rest = old_file.split("-", 2)
    new_dist = re.sub(r"[-_.]+", "_", new_name)
    old_info, new_info = f"{old_dist}-{version}.dist-info/", f"{new_dist}-{version}.dist-info/"
    out = os.path.join(out_dir, f"{new_dist}-{version}-{rest}")
    with zipfile.ZipFile(wheel) as src:
        entries = [(i, src.read(i)) for i in src.infolist()]
    records = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info, data in entries:
            name = info.filename
            if name == old_info + "RECORD":
                continue
            if name.startswith(old_info):
                name = new_info + name[len(old_info):]
            if name == new_info + "METADATA":
                data, n = re.subn(rb"^Name: .*$", f"Name: {new_name}".encode(), data, count=1, flags=re.M)
                if n != 1:
                    sys.exit(f"{wheel}: METADATA has no Name line")
            new = zipfile.ZipInfo(name, date_time=info.date_time)
            new.external_attr = info.external_attr
            new.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(new, data)
            records.append(record_line(name, data))
        for spec in licenses:
            name, sep, path = spec.partition("=")
            if not sep or not name or "/" in name:
                sys.exit(f"{spec!r}: a licence is given as NAME=PATH")
            with open(path, "rb") as f:
                data = f.read()
            dst.writestr(new_info + "licenses/" + name, data)
            records.append(record_line(new_info + "licenses/" + name, data))
        records.append(f"{new_info}RECORD,,")
        dst.writestr(new_info + "RECORD", "\n".join(records) + "\n")
    print(out)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
