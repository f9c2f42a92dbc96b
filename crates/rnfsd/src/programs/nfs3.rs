//! nfs3 program
