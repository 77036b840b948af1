"""Binary content for the legacy fixture server: a tiny PNG, a tiny WAV, resources.

Kept apart from the server so the server file holds only behaviour. The media
are built in code (no binary files in the tree) and are valid files of their
type, because conformance checks the mime types and clients may decode them.
"""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib

from mcp import types


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def _one_pixel_png() -> bytes:
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte + one red pixel
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", pixels) + _png_chunk(b"IEND", b"")


def _short_silence_wav() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)  # 10 ms of silence
    return buffer.getvalue()


PNG_BYTES = _one_pixel_png()
WAV_BYTES = _short_silence_wav()


def image_content() -> types.ImageContent:
    """The fixture PNG as image content."""
    data = base64.b64encode(PNG_BYTES).decode()
    return types.ImageContent(type="image", data=data, mimeType="image/png")


def audio_content() -> types.AudioContent:
    """The fixture WAV as audio content."""
    data = base64.b64encode(WAV_BYTES).decode()
    return types.AudioContent(type="audio", data=data, mimeType="audio/wav")


def embedded_text(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    """A text resource embedded in a tool result or prompt message."""
    contents = types.TextResourceContents(uri=uri, mimeType=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)
