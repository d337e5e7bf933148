//! The HTTP server (filled in by the server work).
