"""Image files read as an array when they are read: `ImageFiles`, what `--stream` trains on.

A folder of a few hundred thousand photos does not fit in memory decoded (50,000 images of 224 x 224 x 3 are
7.5 GB as uint8, four times that as float32); timm and Keras read them batch by batch. `ImageFiles` holds the
files' paths and stands for the uint8 array `[N, size, size, 3]` their decoded, resized pixels make: indexing it
gives another `ImageFiles` (a subset, nothing read), and NumPy's conversion (`np.asarray`, which the input
pipeline applies to each batch) decodes those files then, each with `read_resized`, the function the in-memory
loader (`own.load_image_folder`) reads every image with, so both paths feed the same pixels.
"""

import numpy as np

from keras_tse._checks import InputError

SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")  # Pillow's modes of a 16-bit grey file
WITH_ALPHA = ("RGBA", "RGBa", "LA", "La", "PA")


def _rgb(image, file):
    """`image` as 8-bit RGB by what its pixels mean: 16-bit grey scaled by its bit depth (Pillow's own
    conversion clips it at 255, turning most pixels white), transparency laid over white (a transparent
    pixel's hidden colour is often black), palettes through their colours; float images are refused."""
    from PIL import Image

    if image.mode in SIXTEEN_BIT:
        grey = np.asarray(image).astype("float64")
        if grey.min() < 0 or grey.max() > 65535:
            raise InputError(file, f"a {image.mode} image with values {grey.min():g}..{grey.max():g}", "8 or 16 bits")
        return Image.fromarray(np.round(grey / 257.0).astype("uint8"), "L").convert("RGB")
    if image.mode == "F":
        raise InputError(file, "a 32-bit float image", "8- or 16-bit images (BMP, GIF, JPEG, PNG or TIFF)")
    if image.mode in WITH_ALPHA or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    return image.convert("RGB")


def read_image(file):
    """One image file as 8-bit RGB pixels `[height, width, 3]`, at its own size (`_rgb`'s conversions); one line
    for a file that is no readable image."""
    from PIL import Image

    try:
        with Image.open(file) as image:
            return np.asarray(_rgb(image, file))
    except InputError:
        raise
    except (OSError, ValueError) as error:  # Pillow's UnidentifiedImageError is an OSError
        raise InputError(
            file, f"a file that is not a readable image ({error})", "a BMP, GIF, JPEG, PNG or TIFF image"
        ) from None


def read_resized(file, image_size):
    """One image file as `[image_size, image_size, 3]` uint8 RGB, resized bilinearly: what every loaded image is."""
    from PIL import Image  # Pillow comes with keras_tse (and with matplotlib)

    return np.asarray(Image.fromarray(read_image(file)).resize((image_size, image_size), Image.BILINEAR))


class ImageFiles:
    """The images of `files`, each decoded and resized to `image_size` when read.

    Args:
        files: image file paths, in the array's order.
        image_size: int, the side every image is resized to.
    """

    dtype = np.dtype("uint8")
    ndim = 4

    def __init__(self, files, image_size):
        self.files, self.image_size = list(files), int(image_size)

    @property
    def shape(self):
        return (len(self.files), self.image_size, self.image_size, 3)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, key):
        """Rows by an int (that image, decoded), a slice, an int array or a boolean mask (a subset, unread)."""
        if isinstance(key, (int, np.integer)):
            return read_resized(self.files[key], self.image_size)
        rows = np.arange(len(self.files))[key]
        return ImageFiles([self.files[i] for i in np.atleast_1d(rows)], self.image_size)

    def __array__(self, dtype=None, copy=None):
        images = np.empty(self.shape, "uint8")
        for row, file in enumerate(self.files):
            images[row] = read_resized(file, self.image_size)
        return images if dtype is None else images.astype(dtype)

    def __repr__(self):
        return f"ImageFiles({len(self.files)} files, {self.image_size}x{self.image_size})"


def channel_statistics(images, chunk=256):
    """Per-channel mean and standard deviation of `images` (an array or `ImageFiles`) in [0, 1] units, summed in
    float64 over chunks of `chunk` images: one pass, never the whole set decoded at once (a chunk of 256 images of
    128 x 128 is 100 MiB in float64; 2,048 took 0.8 GiB more at the peak of a streamed run)."""
    total = squares = 0.0
    for start in range(0, len(images), chunk):
        pixels = np.asarray(images[start : start + chunk]).reshape(-1, images.shape[-1]).astype("float64") / 255.0
        total, squares = total + pixels.sum(0), squares + np.square(pixels).sum(0)
    count = len(images) * int(np.prod(images.shape[1:-1]))
    mean = total / count
    return mean, np.sqrt(np.maximum(squares / count - np.square(mean), 0.0))
