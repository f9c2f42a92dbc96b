//! rnfsd-pool
