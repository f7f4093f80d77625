"""The works that methods cite, as data: one entry per paper under a short stable key.

A method's ``reference`` names its sources as parts separated by ``;``. A part that starts with a key of
:data:`BIBLIOGRAPHY` (``"fantomas §6.1, Table IV"``) cites that entry, the rest of the part being the place in it;
any other part is free text, printed as written (a third-party plugin's ``"Doe et al., 2023"`` keeps working).
:func:`cite` turns a reference into the text ``bioanon describe`` and the method catalogue show, and the docs'
bibliography page is generated from the same entries (its anchors are the keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BIBLIOGRAPHY", "Entry", "cite", "reference_keys", "split_reference"]


@dataclass(frozen=True)
class Entry:
    """One cited work. ``venue`` and ``link`` are empty where they are not known for sure."""

    key: str
    authors: str
    title: str
    year: int
    venue: str = ""
    link: str = ""
    short_venue: str = ""  # the venue in the short citation, where ``venue`` is long

    @property
    def short(self) -> str:
        """``"Todt et al., Fantômas (arXiv 2022)"``: the first author, the title's head, venue and year."""
        names = [n.strip() for n in re.split(r",| and ", self.authors) if n.strip()]
        surname = names[0].split()[-1] if names else ""
        if len(names) > 2:
            who = f"{surname} et al."
        elif len(names) == 2:
            who = f"{surname} & {names[1].split()[-1]}"
        else:
            who = surname
        title = self.title.split(":")[0]
        venue = self.short_venue or self.venue
        where = f"{venue} {self.year}" if venue else str(self.year)
        return f"{who}, {title} ({where})"

    def full(self) -> str:
        """The bibliography line: authors, title, venue, year and link."""
        parts = [self.authors, f"“{self.title}”", self.venue, str(self.year)]
        text = ". ".join(p for p in parts if p) + "."
        return f"{text} <{self.link}>" if self.link else text


_ENTRIES = (
    # The papers whose methodology bioanon implements.
    Entry(
        "false-sense",
        "Simon Hanisch, Julian Todt, Jose Patino, Nicholas Evans and Thorsten Strufe",
        "A False Sense of Privacy: Towards a Reliable Evaluation Methodology for the Anonymization of Biometric Data",
        2024,
        "Proceedings on Privacy Enhancing Technologies 2024(1), 116–132",
        "https://doi.org/10.56553/popets-2024-0008",
        short_venue="PoPETs",
    ),
    Entry(
        "fantomas",
        "Julian Todt, Simon Hanisch and Thorsten Strufe",
        "Fantômas: Understanding Face Anonymization Reversibility",
        2022,
        "arXiv",
        "https://arxiv.org/abs/2210.10651",
    ),
    Entry(
        "seba",
        "Julian Todt, Simon Hanisch and Thorsten Strufe",
        "SEBA: Strong Evaluation of Biometric Anonymizations",
        2024,
        "arXiv",
    ),
    Entry(
        "soft-biometric",
        "Dailé Osorio-Roig, Christian Rathgeb, Pawel Drozdowski, Philipp Terhörst, Vitomir Štruc and Christoph Busch",
        "An Attack on Feature Level-based Facial Soft-biometric Privacy Enhancement",
        2021,
        "arXiv",
        "https://arxiv.org/abs/2111.12405",
    ),
    Entry(
        "utility-preserving",
        "Chun-Fu Chen, Bill Moriarty, Shaohan Hu, Sean Moran, Marco Pistoia, Vincenzo Piuri and Pierangela Samarati",
        "Model-Agnostic Utility-Preserving Biometric Information Anonymization",
        2024,
        "arXiv",
        "https://arxiv.org/abs/2405.15062",
    ),
    # Works the methods implement or build on.
    Entry(
        "arcface",
        "Jiankang Deng, Jia Guo, Niannan Xue and Stefanos Zafeiriou",
        "ArcFace: Additive Angular Margin Loss for Deep Face Recognition",
        2019,
        "CVPR",
        "https://doi.org/10.1109/CVPR.2019.00482",
    ),
    Entry(
        "eigenfaces",
        "Matthew Turk and Alex Pentland",
        "Eigenfaces for Recognition",
        1991,
        "Journal of Cognitive Neuroscience 3(1)",
        "https://doi.org/10.1162/jocn.1991.3.1.71",
        short_venue="J. Cognitive Neuroscience",
    ),
    Entry(
        "lbph",
        "Timo Ahonen, Abdenour Hadid and Matti Pietikäinen",
        "Face Description with Local Binary Patterns: Application to Face Recognition",
        2006,
        "IEEE Transactions on Pattern Analysis and Machine Intelligence 28(12)",
        "https://doi.org/10.1109/TPAMI.2006.244",
        short_venue="IEEE TPAMI",
    ),
    Entry(
        "k-same",
        "Elaine M. Newton, Latanya Sweeney and Bradley Malin",
        "Preserving Privacy by De-identifying Face Images",
        2005,
        "IEEE Transactions on Knowledge and Data Engineering 17(2), 232–243",
        "https://doi.org/10.1109/tkde.2005.32",
        short_venue="IEEE TKDE",
    ),
    Entry(
        "ive",
        "Philipp Terhörst, Naser Damer, Florian Kirchbuchner and Arjan Kuijper",
        "Suppressing Gender and Age in Face Templates Using Incremental Variable Elimination",
        2019,
        "International Conference on Biometrics (ICB)",
        short_venue="ICB",
    ),
    Entry(
        "pe-miu",
        "Philipp Terhörst, Kevin Riehl, Naser Damer, Peter Rot, Blaz Bortolato, Florian Kirchbuchner, Vitomir Štruc "
        "and Arjan Kuijper",
        "PE-MIU: A Training-Free Privacy-Enhancing Face Recognition Approach Based on Minimum Information Units",
        2020,
        "IEEE Access 8, 93635–93647",
        short_venue="IEEE Access",
    ),
    Entry(
        "pfrnet",
        "Blaz Bortolato, Marija Ivanovska, Peter Rot, Janez Križaj, Philipp Terhörst, Naser Damer, Peter Peer and "
        "Vitomir Štruc",
        "Learning Privacy-Enhancing Face Representations through Feature Disentanglement",
        2020,
        "IEEE International Conference on Automatic Face and Gesture Recognition (FG 2020)",
        short_venue="FG",
    ),
    Entry(
        "gait-identification",
        "Simon Hanisch, Evelyn Muschter, Adamantini Hatzipanayioti, Shu-Chen Li and Thorsten Strufe",
        "Understanding Person Identification Through Gait",
        2023,
        "Proceedings on Privacy Enhancing Technologies",
        "https://petsymposium.org/popets/2023/popets-2023-0011.php",
        short_venue="PoPETs",
    ),
    Entry(
        "ssim",
        "Zhou Wang, Alan C. Bovik, Hamid R. Sheikh and Eero P. Simoncelli",
        "Image Quality Assessment: From Error Visibility to Structural Similarity",
        2004,
        "IEEE Transactions on Image Processing 13(4), 600–612",
        "https://doi.org/10.1109/TIP.2003.819861",
        short_venue="IEEE TIP",
    ),
    Entry(
        "lpips",
        "Richard Zhang, Phillip Isola, Alexei A. Efros, Eli Shechtman and Oliver Wang",
        "The Unreasonable Effectiveness of Deep Features as a Perceptual Metric",
        2018,
        "CVPR",
        "https://arxiv.org/abs/1801.03924",
    ),
    Entry(
        "motionsense",
        "Mohammad Malekzadeh, Richard G. Clegg, Andrea Cavallaro and Hamed Haddadi",
        "Mobile Sensor Data Anonymization",
        2019,
        "International Conference on Internet of Things Design and Implementation (IoTDI)",
        short_venue="IoTDI",
    ),
    Entry(
        "x-vectors",
        "David Snyder, Daniel Garcia-Romero, Gregory Sell, Daniel Povey and Sanjeev Khudanpur",
        "X-vectors: Robust DNN Embeddings for Speaker Recognition",
        2018,
        "ICASSP",
        "https://doi.org/10.1109/ICASSP.2018.8461375",
    ),
)

#: Every cited work by key, in the order of the bibliography page.
BIBLIOGRAPHY: dict[str, Entry] = {e.key: e for e in _ENTRIES}

_KEY = re.compile(r"^\s*([a-z0-9][a-z0-9-]*)(?=\s|$)(.*)$", re.DOTALL)


def split_reference(reference: str) -> list[tuple[Entry | None, str]]:
    """The parts of a reference: ``(entry, place)`` for a part citing a bibliography key, ``(None, text)`` else."""
    parts: list[tuple[Entry | None, str]] = []
    for part in reference.split(";"):
        part = part.strip()
        if not part:
            continue
        m = _KEY.match(part)
        if m and m.group(1) in BIBLIOGRAPHY:
            parts.append((BIBLIOGRAPHY[m.group(1)], m.group(2).strip()))
        else:
            parts.append((None, part))
    return parts


def reference_keys(reference: str) -> list[str]:
    """The bibliography keys a reference cites, in order."""
    return [entry.key for entry, _ in split_reference(reference) if entry is not None]


def cite(reference: str, link: str | None = None) -> str:
    """The reference as a reader sees it: each key replaced by its short citation (``link`` given: a Markdown
    link to ``{link}#key``), followed by the place in the work; free-text parts as written."""
    out = []
    for entry, place in split_reference(reference):
        if entry is None:
            out.append(place)
            continue
        text = f"[{entry.short}]({link}#{entry.key})" if link is not None else entry.short
        out.append(f"{text}, {place}" if place else text)
    return "; ".join(out)
