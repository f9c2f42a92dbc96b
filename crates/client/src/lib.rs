//! rnfsd-client
