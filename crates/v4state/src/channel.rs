//! A session's channel attributes and CREATE_SESSION's result (RFC 8881
//! §18.36): plain data, below the client records because a client's
//! CREATE_SESSION slot caches the result (`registry::CsSlot`). The
//! `session` module re-exports them.

use crate::ids::SessionId;

/// A channel's attributes (channel_attrs4, without RDMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChannelAttrs {
    pub header_pad_size: u32,
    pub max_request_size: u32,
    pub max_response_size: u32,
    pub max_response_size_cached: u32,
    pub max_operations: u32,
    /// The number of slots.
    pub max_requests: u32,
}

/// CREATE_SESSION's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCreated {
    pub sessionid: SessionId,
    pub sequence: u32,
    /// The flags granted (CONN_BACK_CHAN only).
    pub flags: u32,
    pub fore: ChannelAttrs,
    pub back: ChannelAttrs,
}
