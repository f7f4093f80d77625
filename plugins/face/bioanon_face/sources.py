"""Dataset sources producing face tables: payload ``image`` = uint8 (N, H, W, C).

Every source takes ``size`` = (height, width) to resize to ((0, 0) = keep the native size, which must then be
the same for every image) and ``channels``: 0 (default) keeps the data set's own — grey sets (ORL, the .mat
benchmarks) stay single-channel (C = 1), colour sets have C = 3; 1 converts colour to grey; 3 expands grey to
three equal channels (e.g. for recognizers that need RGB). Resizing uses OpenCV's INTER_AREA when shrinking
(INTER_LINEAR when enlarging), all images of one native shape in one call.

* ``face.orl`` — the ORL / AT&T database (``s1..s40/1..10.pgm``, 92×112 grey);
* ``face.mat`` — a MATLAB ``.mat`` file with ``x`` (H×W×N uint8) and ``label`` (N×1), e.g. GT, IMM, UMIST;
* ``face.folder`` — one folder per subject, optional attribute CSV;
* ``face.seba`` — SEBA's flat layout (``data/<set>/<id>.<point>.jpg`` + YAML attributes);
* ``face.celeba`` — CelebA's aligned layout with identities and the 40 binary attributes;
* ``face.synthetic`` — seeded procedural faces (in :mod:`bioanon_face.synthetic`).

Files that cannot be decoded raise :class:`~bioanon.errors.TableError` naming the file; with
``skip_bad_files=true`` they are skipped and listed in the table metadata under ``skipped_files``.

With ``align=true`` the file sources detect the face in every image with OpenCV's Haar cascades, rotate it so
the eye line is horizontal and crop it (``margin`` around the face box, the output's aspect ratio) before
resizing to ``size`` (:func:`bioanon_face.detect.align_faces`). Images where no face is found are listed in
the metadata under ``no_face_files`` (and in a :class:`~bioanon_face.detect.NoFaceWarning`); ``no_face``
chooses whether they are dropped (``skip``) or kept whole, resized but uncropped (``keep``). The metadata's
``alignment`` holds the counts (images, faces found, eye pairs found).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from bioanon.api import (
    DataError,
    DatasetSource,
    Metadata,
    TableError,
    param,
    read_metadata_csv,
    resolve_within,
    seba_sample_attributes,
    seba_set,
    uniform_column,
)

from .imageio import IMAGE_EXTENSIONS, check_size, read_images, to_batch

if TYPE_CHECKING:  # imported where tables are made: bioanon.table imports pyarrow, too slow for start-up
    from bioanon.api import SampleTable

_SIZE_HELP = "(height, width) to resize every image to; (0, 0) keeps the native size"
_CHANNELS_HELP = "0 keeps the data set's channels (grey stays 1), 1 converts to grey, 3 expands grey to RGB"
_SKIP_HELP = "skip files that cannot be decoded (listed in the metadata as skipped_files) instead of raising"
_ALIGN_HELP = (
    "detect the face (OpenCV Haar cascades), rotate the eye line horizontal and crop around the face before resizing"
)
_MARGIN_HELP = "with align: crop margin on each side of the face box, as a share of the box's side"
_NO_FACE_HELP = (
    "with align: images where no face is found are dropped (skip) or kept whole, uncropped (keep); "
    "either way they are listed in the metadata as no_face_files"
)


def _natural_key(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _metadata(source: str, x: np.ndarray, skipped: list[str], **extra: Any) -> dict:
    meta = {
        "trait": "face",
        "source": source,
        "image_size": [int(x.shape[1]), int(x.shape[2])],
        "channels": int(x.shape[3]),
    }
    if skipped:
        meta["skipped_files"] = skipped
    meta.update(extra)
    return meta


def _require_dir(path: Any, what: str) -> Path:
    if path is None:
        raise TableError(f"{what}: give the data set's path")
    p = Path(path)
    if not p.is_dir():
        raise TableError(f"{p}: no such directory ({what})")
    return p


def _text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (CelebA's lists); a TableError naming the file when it is not text."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise TableError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); is it the right file?") from None
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e.strerror or e}") from None


@attrs.define(kw_only=True)
class _ImageSource(DatasetSource):
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)

    size: tuple[int, int] = param(
        (0, 0), help=_SIZE_HELP, check=check_size, check_text="(0, 0) or two positive integers"
    )
    channels: int = param(0, help=_CHANNELS_HELP, choices=(0, 1, 3))
    skip_bad_files: bool = param(False, help=_SKIP_HELP)
    align: bool = param(False, help=_ALIGN_HELP)
    margin: float = param(0.2, help=_MARGIN_HELP, low=0.0, high=2.0)
    no_face: str = param("keep", help=_NO_FACE_HELP, choices=("keep", "skip"))

    def _to_batch(
        self, images: list[np.ndarray] | np.ndarray, names: list[str], source: str
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """The images as one batch (aligned face crops with ``align``): (batch, indices kept, metadata extra)."""
        n = len(images)
        if not self.align:
            return to_batch(images, self.size, self.channels), np.arange(n), {}
        from .detect import NoFaceWarning, align_faces

        crops = align_faces(images, self.size, margin=self.margin, channels=self.channels)
        missing = [names[i] for i in np.flatnonzero(~crops.found)]
        meta: dict[str, Any] = {
            "alignment": {
                "images": n,
                "faces_found": int(crops.found.sum()),
                "eyes_found": int(crops.eyes_found.sum()),
                "margin": self.margin,
                "no_face": self.no_face,
            }
        }
        if missing:
            meta["no_face_files"] = missing
            action = "skipped" if self.no_face == "skip" else "kept uncropped"
            meta["load_warnings"] = [
                f"no face found in {len(missing)} image(s), {action}: "
                + ", ".join(missing[:5])
                + (" …" if len(missing) > 5 else "")
            ]
            warnings.warn(
                f"{source}: no face found in {len(missing)} of {n} images ({action}; no_face="
                f"{self.no_face}): " + ", ".join(missing[:10]) + (" …" if len(missing) > 10 else ""),
                NoFaceWarning,
                stacklevel=3,
            )
        keep = np.flatnonzero(crops.found) if self.no_face == "skip" else np.arange(n)
        if len(keep) == 0:
            raise TableError(
                f"{source}: the face detector found no face in any of the {n} images; load without "
                f"align, or with no_face=keep"
            )
        return crops.images[keep], keep, meta

    def _load_files(
        self,
        files: list[Path],
        subjects: list[str],
        ids: list[str],
        source: str,
        attributes: dict[str, list[Any]] | None = None,
        **extra: Any,
    ) -> SampleTable:
        for f in files:  # a name that is not UTF-8 cannot become a sample id: name the file (its bytes as \xff)
            shown = os.fsencode(f).decode("utf-8", "backslashreplace")
            if shown != str(f):
                raise TableError(f"{shown}: the file or folder name is not valid UTF-8 text; rename it")
        images, kept, bad = read_images(files, self.skip_bad_files)
        if not images:
            raise TableError(f"{source}: no readable images")
        x, keep, meta = self._to_batch(images, [str(files[i]) for i in kept], source)
        kept = [kept[i] for i in keep]
        attrs_ = {k: uniform_column([v[i] for i in kept]) for k, v in (attributes or {}).items()}
        from bioanon.api import SampleTable

        return SampleTable.from_arrays(
            sample_id=np.array([ids[i] for i in kept]),
            subject=np.array([subjects[i] for i in kept]),
            payloads={"image": x},
            attributes=attrs_ or None,
            metadata=_metadata(source, x, bad, **meta, **extra),
        )


@attrs.define(kw_only=True)
class OrlFaces(_ImageSource):
    """The ORL (AT&T) face database: 40 subjects × 10 grey 92×112 images, ``s<k>/<i>.pgm``.

    Subjects are ``s1``..``s40``, sample ids ``s<k>/<i>``; attribute ``image_index`` (1..10) — the ten images
    of a subject vary in pose, expression and glasses. Grey, so C = 1 unless ``channels=3``."""

    id: ClassVar[str] = "face.orl"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("image_index",)
    reference: ClassVar[str] = "Samaria & Harter 1994; https://cam-orl.co.uk/facedatabase.html"

    def load(self, path: Any = None) -> SampleTable:
        root = _require_dir(path, self.id)
        dirs = sorted(
            (d for d in root.iterdir() if d.is_dir() and re.fullmatch(r"s\d+", d.name)), key=lambda d: int(d.name[1:])
        )
        if not dirs:
            raise TableError(f"{root}: no s<k>/ subject folders (expected the ORL layout s1..s40/1..10.pgm)")
        files, subjects, ids, index = [], [], [], []
        for d in dirs:
            pgms = sorted(d.glob("*.pgm"), key=lambda p: _natural_key(p.stem))
            for p in pgms:
                files.append(p)
                subjects.append(d.name)
                ids.append(f"{d.name}/{p.stem}")
                index.append(int(p.stem) if p.stem.isdigit() else None)
        if not files:
            raise TableError(f"{root}: the subject folders hold no .pgm images")
        return self._load_files(files, subjects, ids, self.id, {"image_index": index})


@attrs.define(kw_only=True)
class MatFaces(_ImageSource):
    """A face set stored as a MATLAB v5 ``.mat`` file: ``x`` (H×W×N uint8, or N×H×W with ``layout``) and
    ``label`` (N×1, subject numbers), e.g. the GT, IMM and UMIST benchmark files.

    Subjects are ``<stem>_<label>``, sample ids ``<stem>_<n>`` (n = 0-based index in the file)."""

    id: ClassVar[str] = "face.mat"
    attribute_names: ClassVar[tuple[str, ...] | None] = ()

    images_key: str = param("x", help="variable holding the images")
    label_key: str = param("label", help="variable holding the subject labels")
    layout: str = param("HWN", help="axis order of the image array", choices=("HWN", "NHW", "HWCN", "NHWC"))

    def load(self, path: Any = None) -> SampleTable:
        import scipy.io

        if path is None:
            raise TableError(f"{self.id}: give the .mat file's path")
        p = Path(path)
        if not p.is_file():
            raise TableError(f"{p}: no such .mat file")
        try:
            d = scipy.io.loadmat(str(p))
        except Exception as e:  # noqa: BLE001 - scipy raises several kinds
            raise TableError(f"{p}: not a readable MATLAB .mat file ({e})") from None
        for key in (self.images_key, self.label_key):
            if key not in d:
                raise TableError(f"{p}: no variable {key!r}; it has {sorted(k for k in d if not k.startswith('__'))}")
        x = np.asarray(d[self.images_key])
        labels = np.asarray(d[self.label_key]).ravel()
        order = {"HWN": (2, 0, 1), "NHW": (0, 1, 2), "HWCN": (3, 0, 1, 2), "NHWC": (0, 1, 2, 3)}[self.layout]
        if x.ndim != len(order):
            raise TableError(f"{p}: {self.images_key!r} has shape {x.shape}, which does not fit layout {self.layout}")
        x = np.transpose(x, order)
        if len(labels) != len(x):
            raise TableError(f"{p}: {len(x)} images but {len(labels)} labels")
        if x.dtype != np.uint8:
            x = np.clip(np.rint(x * 255.0) if x.dtype.kind == "f" and x.max() <= 1.0 else x, 0, 255).astype(np.uint8)
        ids = [f"{p.stem}_{i}" for i in range(len(x))]
        batch, keep, meta = self._to_batch(x, [f"{p.name}[{i}]" for i in range(len(x))], self.id)
        lab = [str(int(v)) if np.issubdtype(np.asarray(v).dtype, np.number) else str(v) for v in labels]
        from bioanon.api import SampleTable

        return SampleTable.from_arrays(
            sample_id=np.array(ids)[keep],
            subject=np.array([f"{p.stem}_{v}" for v in lab])[keep],
            payloads={"image": batch},
            metadata=_metadata(self.id, batch, [], file=p.name, **meta),
        )


@attrs.define(kw_only=True)
class FolderFaces(_ImageSource):
    """Images in one folder per subject: ``<root>/<subject>/<image>`` (png, jpg, bmp, pgm, tif, webp, …).

    Sample ids are ``<subject>/<file name>``. An optional CSV ``attributes`` (relative to the root) adds
    attributes (numbers parsed, empty cells null). It is per image when it has a file column (``path``,
    ``file``, ``filename``, …: ``<subject>/<file name>``; a subject column there must match the folder), else
    per subject with a subject column (``subject``, ``identity``, …). Key columns never become attributes. An
    image listed twice, a row naming no image and conflicting rows of one subject are errors naming the rows;
    images (subjects) without a row get null attributes and a warning (rules: :mod:`bioanon.metadata`).
    Images of different sizes need ``size``."""

    id: ClassVar[str] = "face.folder"

    attributes: str = param("attributes.csv", help="attribute CSV relative to the root (used when present)")

    def load(self, path: Any = None) -> SampleTable:
        root = _require_dir(path, self.id)
        files, subjects, ids = [], [], []
        for d in sorted(
            (d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")), key=lambda d: _natural_key(d.name)
        ):
            for f in sorted(d.iterdir(), key=lambda f: _natural_key(f.name)):
                if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS:
                    try:  # a symlink may not lead out of the data root
                        resolve_within(root, f.relative_to(root), where=self.id)
                    except DataError as e:
                        raise TableError(str(e)) from None
                    files.append(f)
                    subjects.append(d.name)
                    ids.append(f"{d.name}/{f.name}")
        if not files:
            raise TableError(f"{root}: no images in subject folders (expected <root>/<subject>/<image>)")
        attributes: dict[str, list[Any]] = {}
        csv_path = root / self.attributes if self.attributes else None
        if csv_path is not None and csv_path.is_file():
            attributes = read_metadata_csv(csv_path).join(ids, subjects)
        return self._load_files(files, subjects, ids, self.id, attributes)


# --------------------------------------------------------------------------------------------------- SEBA

#: the image types SEBA's face trait reads (``jpg`` -> Image, ``png`` -> PNGImage)
SEBA_IMAGE_EXTENSIONS = (".jpg", ".png")


@attrs.define(kw_only=True)
class SebaFaces(_ImageSource):
    """Import a face data set in SEBA's flat layout (https://github.com/kit-ps/seba), so SEBA users can migrate.

    Layout under SEBA's ``data/`` folder: ``<set>.meta.yaml`` (``trait: face``) and ``<set>/`` holding every
    image flat as ``<id>.<point>.jpg`` (or ``.png``), identity attributes in ``<set>/<id>.yaml`` and per-image
    ones (e.g. ``bbox``) in ``<set>/<id>.<point>.yaml`` (YAML read with the safe loader only; lists and
    mappings become JSON text). ``path`` is the ``data/`` folder (then ``set`` names the set; it may be left
    empty when there is exactly one face set), the ``<set>.meta.yaml`` file or the ``<set>/`` folder. Subjects
    are the ``<id>`` parts, sample ids SEBA's datapoint keys ``<id>.<point>``; per-image values override the
    identity's. A name with more or fewer dots, or a ``subject``/``sample_id`` attribute that differs from the
    file name, is an error naming the file. Symlinks (SEBA's derived sets) may not lead out of the data folder.
    Images of different sizes need ``size``."""

    id: ClassVar[str] = "face.seba"
    reference: ClassVar[str] = "seba"

    set: str = param("", help="name of the SEBA data set (default: the only face set in the folder)")

    def load(self, path: Any = None) -> SampleTable:
        if path is None:
            raise TableError(f"{self.id}: give the path of SEBA's data folder (or of a <set>.meta.yaml)")
        _meta_path, folder, _meta = seba_set(path, self.set, "face", who=self.id)
        data_root = folder.parent
        files, subjects, ids, rows = [], [], [], []
        identity_attrs: dict[str, dict[str, Any]] = {}
        for f in sorted(folder.iterdir(), key=lambda f: _natural_key(f.name)):
            if f.suffix.lower() not in SEBA_IMAGE_EXTENSIONS or not f.is_file():
                continue
            parts = f.name.split(".")
            if len(parts) != 3 or not parts[0] or not parts[1]:
                raise TableError(
                    f"{f}: expected SEBA's <id>.<point>{f.suffix} (neither part may contain a dot or be empty)"
                )
            try:  # a symlink may not lead out of the data folder
                resolve_within(data_root, f.relative_to(data_root), where=self.id)
            except DataError as e:
                raise TableError(str(e)) from None
            identity, key = parts[0], f"{parts[0]}.{parts[1]}"
            rows.append(seba_sample_attributes(folder, identity, key, f.name, identity_attrs, who=self.id))
            files.append(f)
            subjects.append(identity)
            ids.append(key)
        if not files:
            raise TableError(f"{folder}: no <id>.<point>.jpg or .png images (SEBA's face layout)")
        names = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in ("subject", "sample_id")]
        attributes = {k: [row.get(k) for row in rows] for k in names}
        return self._load_files(files, subjects, ids, self.id, attributes, seba_set=folder.name)


@attrs.define(kw_only=True)
class CelebAFaces(_ImageSource):
    """CelebA (aligned): ``img_align_celeba/``, ``identity_CelebA.txt`` and ``list_attr_celeba.txt``.

    Keeps the identities with at least ``min_images`` images and at most ``max_images`` images each (the
    first ones in file order) — the papers' filter (the False Sense of Privacy paper §5: ≥ 8 images, at most
    20), optionally only the ``max_subjects`` identities with the most images (the Fantômas paper takes the
    top 5000). The 40 binary attributes become boolean attributes (``attr.Male``, ``attr.Eyeglasses``, …).
    An image listed twice in either file, or an attribute line for an image missing from the identity file,
    is an error naming the lines; kept images without an attribute line get nulls and a warning."""

    id: ClassVar[str] = "face.celeba"
    reference: ClassVar[str] = "Liu et al., Deep Learning Face Attributes in the Wild, ICCV 2015"

    size: tuple[int, int] = param(
        (64, 64), help=_SIZE_HELP, check=check_size, check_text="(0, 0) or two positive integers"
    )
    min_images: int = param(8, help="drop identities with fewer images", low=1)
    max_images: int = param(20, help="keep at most this many images per identity (0 = all)", low=0)
    max_subjects: int = param(0, help="keep only this many identities, those with the most images (0 = all)", low=0)

    def load(self, path: Any = None) -> SampleTable:
        root = _require_dir(path, self.id)
        img_dir = root / "img_align_celeba"
        ident = root / "identity_CelebA.txt"
        attr_file = root / "list_attr_celeba.txt"
        for need in (img_dir, ident):
            if not need.exists():
                raise TableError(
                    f"{need}: missing (expected the CelebA layout: img_align_celeba/, "
                    f"identity_CelebA.txt, list_attr_celeba.txt)"
                )
        by_subject: dict[str, list[str]] = {}
        seen: dict[str, int] = {}
        for line_no, line in enumerate(_text_lines(ident), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise TableError(f"{ident}:{line_no}: expected '<image> <identity>', got {line!r}")
            if parts[0] in seen:
                raise DataError(f"{ident}: image {parts[0]!r} is listed twice (lines {seen[parts[0]]}, {line_no})")
            seen[parts[0]] = line_no
            by_subject.setdefault(parts[1], []).append(parts[0])
        keep = {s: sorted(v)[: self.max_images or None] for s, v in by_subject.items() if len(v) >= self.min_images}
        if self.max_subjects:
            ranked = sorted(keep, key=lambda s: (-len(by_subject[s]), _natural_key(s)))[: self.max_subjects]
            keep = {s: keep[s] for s in ranked}
        if not keep:
            raise TableError(f"{ident}: no identity has at least {self.min_images} images")
        names = sorted(f for v in keep.values() for f in v)
        subject_of = {f: s for s, v in keep.items() for f in v}
        attributes: dict[str, list[Any]] = {}
        if attr_file.is_file():
            lines = _text_lines(attr_file)
            if len(lines) < 2:
                raise TableError(f"{attr_file}: expected a count line and a header line of attribute names")
            attr_names = lines[1].split()
            keys, line_nos, values = [], [], []
            for line_no, line in enumerate(lines[2:], start=3):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != len(attr_names) + 1:
                    raise TableError(f"{attr_file}:{line_no}: {len(parts) - 1} values for {len(attr_names)} attributes")
                keys.append(parts[0])
                line_nos.append(line_no)
                values.append(parts[1:])
            vals = np.array(values, dtype=str).reshape(len(values), len(attr_names)) == "1"
            meta = Metadata(
                str(attr_file),
                "file",
                "image",
                keys,
                line_nos,
                {a: vals[:, j].tolist() for j, a in enumerate(attr_names)},
            )
            # errors for duplicate lines and lines of images not in the identity file
            attributes = meta.take(meta.match_files(names, other_files=seen))
        files = [img_dir / f for f in names]
        return self._load_files(
            files, [subject_of[f] for f in names], [Path(f).stem for f in names], self.id, attributes
        )
