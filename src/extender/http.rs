//! axum handlers for the extender routes (filled in by the server work).
