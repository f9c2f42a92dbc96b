//! mount program
