// Anchor translation unit that owns the shared precompiled header.
