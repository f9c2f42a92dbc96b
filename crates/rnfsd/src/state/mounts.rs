//! MOUNT's list of who mounted what (`Server::mounts`), for DUMP.

use std::collections::VecDeque;

use rnfsd_proto::mount::{DirPath, MountBody, MountList, Name};

use crate::limits::MAX_MOUNT_ENTRIES;

/// The (client, path) pairs of successful MNTs.
#[derive(Debug, Default)]
pub struct MountTable {
    entries: VecDeque<(String, Vec<u8>)>,
}

impl MountTable {
    pub fn add(&mut self, host: &str, path: &[u8]) {
        if self.entries.iter().any(|(h, p)| h == host && p == path) {
            return;
        }
        if self.entries.len() >= MAX_MOUNT_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back((host.to_owned(), path.to_vec()));
        debug_assert!(self.entries.len() <= MAX_MOUNT_ENTRIES);
    }

    pub fn remove(&mut self, host: &str, path: &[u8]) {
        self.entries.retain(|(h, p)| !(h == host && p == path));
    }

    pub fn remove_host(&mut self, host: &str) {
        self.entries.retain(|(h, _)| h != host);
    }

    pub fn list(&self) -> MountList {
        MountList(
            self.entries
                .iter()
                .map(|(h, p)| MountBody {
                    hostname: Name(h.as_bytes().to_vec()),
                    directory: DirPath(p.clone()),
                })
                .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
