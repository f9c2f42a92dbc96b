//! Tests of the state as the protocol layer drives it.

mod clients;

use std::sync::Arc;

use crate::*;

pub(crate) fn state() -> Arc<State> {
    state_with(Config::default())
}

pub(crate) fn state_with(cfg: Config) -> Arc<State> {
    State::with_key(cfg, 7, [9; 32])
}

pub(crate) fn who(name: &str) -> Principal {
    Principal(name.as_bytes().to_vec())
}

pub(crate) fn exid(
    s: &State,
    owner: &str,
    verf: u8,
    principal: &str,
) -> Result<ExchangeIdOk, V4Error> {
    s.exchange_id(&ExchangeIdArgs {
        owner: owner.as_bytes(),
        verifier: Verifier([verf; 8]),
        principal: &who(principal),
        update: false,
    })
}
