//! The local-directory backend.
