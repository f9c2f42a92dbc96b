//! portmap program
