"""Fetching a published archive with a checksum, shared by the data sets that need one."""

import hashlib
import os


def get_file(name, urls, folder, file_hash, hash_algorithm, missing_message):
    """`keras.utils.get_file` into `folder` from the first of `urls` (one URL, or mirrors) that answers,
    its hash checked; FileNotFoundError(message) when none does (offline).

    Keras downloads to a temporary name with a progress bar, and checks the hash before the file
    counts as fetched, so a download cut short is fetched again next time; a file that arrives with
    the wrong hash is removed and a ValueError names it.
    """
    import keras

    os.makedirs(folder, exist_ok=True)  # get_file falls back to /tmp/.keras for a folder it cannot write
    errors = []
    for url in [urls] if isinstance(urls, str) else urls:
        try:
            return keras.utils.get_file(
                name,
                url,
                file_hash=file_hash,
                hash_algorithm=hash_algorithm,
                cache_dir=os.path.abspath(folder),
                cache_subdir=".",
            )
        except ValueError:  # it arrived with the wrong hash: Keras' message names it; Keras keeps the file
            target = os.path.join(folder, name)
            if os.path.exists(target):
                os.remove(target)  # so it never passes for the data set next time
            raise
        except Exception as error:  # noqa: BLE001 - URLError, HTTPError, OSError: try the next mirror
            errors.append(f"{url}: {error}")
    raise FileNotFoundError(missing_message(f"the download failed: {'; '.join(errors)}"))


def check_md5(archive, expected, what, url):
    digest = hashlib.md5()
    with open(archive, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ValueError(
            f"{archive} is corrupt or not {what}: MD5 {digest.hexdigest()}, expected {expected}. "
            f"Delete it and fetch {url} again."
        )
