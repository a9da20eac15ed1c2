"""Fetching a published archive with a checksum, shared by the data sets that need one."""

import hashlib
import os
import urllib.error
import urllib.request


def download(urls, archive, missing_message):
    """Fetch the first of `urls` that answers into `archive`; FileNotFoundError(message) if none does.

    The bytes go to `archive + ".part"` first, so a download cut short never passes for the archive.
    """
    os.makedirs(os.path.dirname(archive) or ".", exist_ok=True)
    partial = archive + ".part"
    errors = []
    for url in urls:
        try:
            urllib.request.urlretrieve(url, partial)
        except (urllib.error.URLError, OSError) as error:
            errors.append(f"{url}: {error}")
            if os.path.exists(partial):
                os.remove(partial)
            continue
        os.replace(partial, archive)
        return
    raise FileNotFoundError(missing_message(f"the download failed: {'; '.join(errors)}"))


def get_file(name, url, folder, file_hash, hash_algorithm, missing_message):
    """`keras.utils.get_file` into `folder`, its hash checked; FileNotFoundError(message) when offline.

    Keras writes to a temporary name and checks the hash before the file counts as fetched, so a
    download cut short is fetched again next time.
    """
    import keras

    os.makedirs(folder, exist_ok=True)  # get_file falls back to /tmp/.keras for a folder it cannot write
    try:
        return keras.utils.get_file(
            name,
            url,
            file_hash=file_hash,
            hash_algorithm=hash_algorithm,
            cache_dir=os.path.abspath(folder),
            cache_subdir=".",
        )
    except ValueError:
        raise  # a file that arrived with the wrong hash: Keras' message names it
    except Exception as error:
        raise FileNotFoundError(missing_message(f"the download of {url} failed: {error}")) from error


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
