import operator
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chute_core import (
    CorruptRecordError,
    RandomAccessDataSource,
    RecordIndexError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
    SupportsGetItems,
)
from chute_sources import ImageFolderSource

PNG = b"\x89PNG\r\n\x1a\n"  # How a PNG file starts; the source decodes nothing.
JPEG = b"\xff\xd8\xff"  # How a JPEG file starts.

# The folder the `images` fixture writes: (path, label) of every image, in record order.
EXPECTED = [
    ("cat/0.png", 0),
    ("cat/1.JPG", 0),
    ("cat/a/2.jpeg", 0),
    ("cat/a/b/3.png", 0),
    ("cat/c/4.png", 0),
    ("dog/0.jpg", 1),
    ("eel/0.png", 2),
]


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """Three classes with nested folders, upper-case suffixes and files that are skipped."""
    root = tmp_path / "images"
    for number, (path, _) in enumerate(EXPECTED):
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        start = JPEG if path.lower().endswith(("jpg", "jpeg")) else PNG
        file.write_bytes(start + bytes([number]) * number)
    (root / "README.txt").write_text("not a class")  # A file beside the classes.
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / "cat" / ".hidden.png").write_bytes(PNG)
    (root / ".cache" / "x").mkdir(parents=True)  # A hidden folder: no class.
    (root / ".cache" / "x" / "0.png").write_bytes(PNG)
    return root


def _expected_records(root: Path) -> list[dict[str, Any]]:
    return [
        {"image": (root / path).read_bytes(), "label": label, "path": path}
        for path, label in EXPECTED
    ]


# Records ---------------------------------------------------------------------------------


def test_records_are_the_images_with_their_class_label_and_path(images: Path) -> None:
    source = ImageFolderSource(images)
    assert source.classes == ("cat", "dog", "eel")
    assert source.samples == tuple(EXPECTED)
    assert len(source) == 7
    assert list(source) == _expected_records(images)
    assert source.root == str(images)


def test_batched_reads_in_any_order_with_repeats_equal_single_reads(images: Path) -> None:
    source = ImageFolderSource(images)
    keys = [6, 0, 6, -2, 3]
    assert source.__getitems__(keys) == [source[key] for key in keys]
    image = (images / "eel" / "0.png").read_bytes()
    assert source[-1] == {"image": image, "label": 2, "path": "eel/0.png"}


def test_is_a_random_access_source(images: Path) -> None:
    source = ImageFolderSource(images)
    assert isinstance(source, RandomAccessDataSource)
    assert isinstance(source, SupportsGetItems)


def test_a_symbolic_link_to_a_folder_elsewhere_is_followed(images: Path, tmp_path: Path) -> None:
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "9.png").write_bytes(PNG)
    (images / "eel" / "more").symlink_to(tmp_path / "more")
    source = ImageFolderSource(str(images))
    assert [path for path, _ in source.samples][-2:] == ["eel/0.png", "eel/more/9.png"]
    assert source[-1] == {"image": PNG, "label": 2, "path": "eel/more/9.png"}


# Bad keys and bad input -----------------------------------------------------------------


@pytest.mark.parametrize("key", [7, -8])
def test_out_of_range_keys_name_the_source_and_its_length(images: Path, key: int) -> None:
    source = ImageFolderSource(images)
    message = rf"ImageFolderSource\(root='.*images', classes=3, len=7\): record key {key} is out"
    with pytest.raises(RecordIndexError, match=message):
        source[key]
    with pytest.raises(IndexError):
        source.__getitems__([0, key])


@pytest.mark.parametrize("content", [b"GIF89a not a png", b""])
def test_a_file_that_is_no_png_or_jpeg_is_named_when_read(images: Path, content: bytes) -> None:
    (images / "dog" / "9.png").write_bytes(content)
    source = ImageFolderSource(str(images))
    assert source.__getitems__([0, 5]) == [source[0], source[5]]
    with pytest.raises(CorruptRecordError) as caught:
        source[6]
    assert str(caught.value) == (
        f"{str(images / 'dog' / '9.png')!r} is not a PNG or JPEG image "
        f"(it starts with {content[:8]!r})"
    )
    unchecked = ImageFolderSource(images, check=False)
    assert unchecked[6] == {"image": content, "label": 1, "path": "dog/9.png"}


def test_missing_root_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceFileNotFoundError, match=r"image folder '.*nope' does not exist"):
        ImageFolderSource(tmp_path / "nope")


def test_a_file_is_not_an_image_folder(images: Path) -> None:
    with pytest.raises(SourceFileError, match=r"README.txt' is a file; ImageFolderSource needs"):
        ImageFolderSource(images / "README.txt")


def test_a_folder_without_class_subfolders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "0.png").write_bytes(PNG)
    (tmp_path / "flat" / ".hidden").mkdir()
    for root in (tmp_path / "flat", tmp_path / "flat" / ".hidden"):
        with pytest.raises(SourceFileError, match=r"holds no class subfolder; lay the images out"):
            ImageFolderSource(root)


def test_a_class_folder_without_images_is_refused(images: Path) -> None:
    (images / "fox" / "sub").mkdir(parents=True)
    (images / "fox" / "sub" / "notes.txt").write_text("no image")
    with pytest.raises(SourceFileError) as caught:
        ImageFolderSource(images)
    assert str(caught.value) == (
        f"class folder {str(images / 'fox')!r} holds no PNG or JPEG image (every subfolder of "
        "an image folder is a class, as in torchvision's ImageFolder)"
    )


@pytest.mark.parametrize("target", ["root", "class", "own folder"])
def test_a_symbolic_link_loop_is_refused(images: Path, target: str) -> None:
    # os.walk(followlinks=True) would list the images again and again, under the wrong
    # class, until the path no longer resolves (found by fuzzing).
    points_to = {"root": images, "class": images / "cat", "own folder": "."}
    (images / "cat" / "a" / "loop").symlink_to(points_to[target])
    message = r"^'.*/cat/a/loop' is a symbolic link to .*would loop"
    with pytest.raises(SourceFileError, match=message):
        ImageFolderSource(str(images))


@pytest.mark.parametrize("root", [b"images", 3, None])
def test_a_root_of_the_wrong_type_is_refused(root: Any) -> None:
    with pytest.raises(TypeError, match=r"ImageFolderSource: root must be a str or os.PathLike"):
        ImageFolderSource(root)


def test_a_file_removed_after_opening_is_an_os_error_naming_it(images: Path) -> None:
    source = ImageFolderSource(images)
    os.unlink(images / "dog" / "0.jpg")
    with pytest.raises(FileNotFoundError, match=r"dog/0\.jpg"):
        source[5]


# Pickling, closing, repr -----------------------------------------------------------------


def test_pickling_round_trip_gives_the_same_records(images: Path) -> None:
    source = ImageFolderSource(images)
    copy = pickle.loads(pickle.dumps(source))
    assert list(copy) == list(source)
    assert (copy.classes, copy.samples) == (source.classes, source.samples)
    assert repr(copy) == repr(source)


def test_a_relative_root_is_resolved_when_the_source_is_opened(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(images.parent)
    source = ImageFolderSource("images", check=False)
    monkeypatch.chdir(tmp_path.parent)
    assert source[0] == _expected_records(images)[0]
    assert repr(source) == "ImageFolderSource(root='images', classes=3, len=7, check=False)"


def test_read_in_a_spawned_process(images: Path, spawn_pool: Callable[..., Any]) -> None:
    source = ImageFolderSource(images)
    expected = _expected_records(images)
    assert spawn_pool(operator.getitem, source, 6) == expected[6]  # spawn_pool: see conftest.py
    assert spawn_pool(ImageFolderSource.__getitems__, source, [5, 0]) == [expected[5], expected[0]]


def test_close_and_context_manager(images: Path) -> None:
    with ImageFolderSource(images) as source:
        source[0]
    with pytest.raises(SourceClosedError, match=r"ImageFolderSource\(.*\) was closed"):
        source[0]
    copy = pickle.loads(pickle.dumps(source))
    with pytest.raises(SourceClosedError):
        copy.__getitems__([0])
