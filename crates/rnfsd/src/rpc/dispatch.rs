//! Dispatch: header checks, auth, program lookup, reply framing.
