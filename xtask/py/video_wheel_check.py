"""Decodes clips with the installed `spdl_rs` and says where its FFmpeg came from:
`python video_wheel_check.py CLIP_DIR [--out FILE] [--bundled] [--reference FILE]`.

`cargo xtask wheel --release` and `cargo xtask test` run it in the test venv (the build linked
to the system's FFmpeg) with `--out`, then in a fresh venv holding the video wheel
(`spdl-rs-ffmpeg`, FFmpeg bundled) with `--bundled --reference`. It prints (and `--out`
writes) one JSON object: for every video in CLIP_DIR the shape and SHA-256 of
`load_video(path).frames`, for every audio file those of `load_audio(path).waveform`, and
`libs`, the path of each FFmpeg (or codec) library this process mapped, read from
/proc/self/maps after the decodes.

`--bundled`: exits 1 unless every such library lies inside this venv (the wheel's
`spdl_rs_ffmpeg.libs`), libavcodec among them. `--reference FILE`: exits 1 unless every clip
decodes to the same shape and bytes as in FILE and FILE's libavcodec was the system's.
"""

import argparse
import hashlib
import json
import os
import re
import sys

import numpy as np

import spdl_rs
import spdl_rs.io

VIDEO = (".mp4", ".mkv", ".webm", ".avi", ".ts")
AUDIO = (".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a")
# FFmpeg's libraries and the codec library the video wheel bundles.
LIB = re.compile(r"/lib(avcodec|avformat|avutil|avfilter|avdevice|swscale|swresample|postproc|dav1d)[-.][^/]*$")


def digest(array: np.ndarray) -> dict:
    a = np.ascontiguousarray(array)
    return {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


def decode_all(clip_dir: str) -> dict:
    out: dict = {"spdl_rs": os.path.dirname(spdl_rs.__file__), "media": {}}
    for name in sorted(os.listdir(clip_dir)):
        path = os.path.join(clip_dir, name)
        if name.endswith(VIDEO):
            out["media"][name] = digest(np.asarray(spdl_rs.io.load_video(path).frames))
        elif name.endswith(AUDIO):
            out["media"][name] = digest(np.asarray(spdl_rs.io.load_audio(path).waveform))
    with open("/proc/self/maps") as maps:
        paths = {line.split(maxsplit=5)[5].strip() for line in maps if len(line.split(maxsplit=5)) == 6}
    out["libs"] = sorted(p for p in paths if LIB.search(p))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clip_dir")
    parser.add_argument("--out")
    parser.add_argument("--bundled", action="store_true")
    parser.add_argument("--reference")
    args = parser.parse_args()
    got = decode_all(args.clip_dir)
    text = json.dumps(got, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    errors = []
    if not got["media"]:
        errors.append(f"no video or audio file in {args.clip_dir}")
    if args.bundled:
        venv = os.path.realpath(sys.prefix) + os.sep
        outside = [p for p in got["libs"] if not os.path.realpath(p).startswith(venv)]
        if outside:
            errors.append(f"FFmpeg libraries from outside the venv {venv}: {outside}")
        if not any("/libavcodec" in p for p in got["libs"]):
            errors.append("no libavcodec mapped after decoding: is this the FFmpeg wheel?")
    if args.reference:
        with open(args.reference) as f:
            reference = json.load(f)
        ref = reference["media"]
        if not any("/libavcodec" in p and ".libs/" not in p for p in reference["libs"]):
            errors.append(f"the reference {args.reference} is not a build linked to the system's FFmpeg: {reference['libs']}")
        for name in sorted(set(ref) | set(got["media"])):
            if ref.get(name) != got["media"].get(name):
                errors.append(f"{name}: {got['media'].get(name)} here, {ref.get(name)} with the system FFmpeg")
        if not errors:
            print(f"video wheel check: {len(ref)} files decode to the same frames and samples as with the system FFmpeg")
    for e in errors:
        print(f"video wheel check: {e}", file=sys.stderr)
    if args.bundled and not errors:
        print(f"video wheel check: every FFmpeg library comes from the wheel: {got['libs']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
