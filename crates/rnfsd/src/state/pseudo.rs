//! The NFSv4 pseudo-filesystem (RFC 8881 §7.3): one namespace joining
//! every export at its path. Its directories are the root and every
//! ancestor of an export's path that is not itself exported; a name that
//! reaches an export crosses into it (a junction). Rebuilt whenever the
//! exports change (`Server::set_exports`), so a reload's new exports
//! appear at once.
//!
//! A pseudo directory's handle is `PSEUDO_HANDLE` then a 64-bit hash of
//! its path: stable across restarts and reloads (a client holding one
//! keeps using it as long as the directory still exists), and never a
//! valid export handle (those start with the backend's format byte and
//! name an export id, `rnfsd_fs::export_id_of`).

use std::collections::HashMap;

/// The first byte of a pseudo directory's handle: a value no backend's
/// handle format uses (`rnfsd_fs::handle`).
pub const PSEUDO_HANDLE: u8 = 0xf4;

/// A pseudo directory's handle's length: the format byte and the hash.
pub const PSEUDO_HANDLE_LEN: usize = 9;

/// Directories in the tree at most: the root and the ancestors of every
/// export, so bounded by the exports' path components.
pub const MAX_PSEUDO_NODES: usize = 65_536;

/// What a name in a pseudo directory leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// Another pseudo directory (its index).
    Dir(usize),
    /// An export's root (the export's id).
    Export(u32),
}

/// One pseudo directory.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its absolute path ("/" for the root).
    pub path: String,
    /// Its parent's index (the root is its own parent).
    pub parent: usize,
    /// Its entries, sorted by name (READDIR's order and cookies).
    pub children: Vec<(Vec<u8>, Child)>,
    /// Its fileid: the path's hash, with the top bit set so it cannot
    /// equal a small inode number.
    pub fileid: u64,
}

/// The tree of pseudo directories.
#[derive(Debug, Clone)]
pub struct Pseudo {
    nodes: Vec<Node>,
    by_hash: HashMap<u64, usize>,
    /// The pseudo directory each export's root sits in, and its name
    /// there (LOOKUPP from an export's root; `mounted_on_fileid`).
    parent_of_export: HashMap<u32, (usize, Vec<u8>)>,
}

/// FNV-1a over the path: a fixed function, so a pseudo directory's
/// handle and fileid stay the same across restarts and upgrades (std's
/// hasher may change between Rust releases).
fn path_hash(path: &str) -> u64 {
    path.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Pseudo {
    /// The tree for exports at `exports` (id, absolute path). An export at
    /// "/" makes the root itself that export: the tree then has its root
    /// only, and `root_export` names it.
    pub fn build<'a>(exports: impl IntoIterator<Item = (u32, &'a str)>) -> Pseudo {
        let mut p = Pseudo {
            nodes: vec![Node {
                path: "/".into(),
                parent: 0,
                children: Vec::new(),
                fileid: path_hash("/") | 1 << 63,
            }],
            by_hash: HashMap::new(),
            parent_of_export: HashMap::new(),
        };
        p.by_hash.insert(path_hash("/"), 0);
        let mut exports: Vec<(u32, &str)> = exports.into_iter().collect();
        // Shorter paths first: an export below another export is reached
        // through the outer one's filesystem, not the pseudo tree.
        exports.sort_by_key(|(_, path)| path.len());
        let mut exported: Vec<&str> = Vec::new();
        for (id, path) in exports {
            let inside_another = exported
                .iter()
                .any(|e| *e == "/" || path.strip_prefix(e).is_some_and(|r| r.starts_with('/')));
            if inside_another || path == "/" {
                exported.push(path);
                if path == "/" {
                    p.parent_of_export.insert(id, (0, Vec::new()));
                }
                continue;
            }
            exported.push(path);
            let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
            let Some((last, dirs)) = comps.split_last() else {
                continue;
            };
            let mut at = 0;
            let mut walked = String::new();
            for c in dirs {
                walked.push('/');
                walked.push_str(c);
                at = match p.child(at, c.as_bytes()) {
                    Some(Child::Dir(i)) => i,
                    // An export's root is not a pseudo directory: a longer
                    // export below it was skipped above.
                    Some(Child::Export(_)) => break,
                    None => match p.add_dir(at, c, &walked) {
                        Some(i) => i,
                        None => break,
                    },
                };
            }
            p.insert(at, last.as_bytes().to_vec(), Child::Export(id));
            p.parent_of_export
                .insert(id, (at, last.as_bytes().to_vec()));
        }
        p
    }

    fn add_dir(&mut self, parent: usize, name: &str, path: &str) -> Option<usize> {
        if self.nodes.len() >= MAX_PSEUDO_NODES {
            tracing::warn!(
                path,
                "the pseudo-filesystem is full; this export is not in it"
            );
            return None;
        }
        let i = self.nodes.len();
        let hash = path_hash(path);
        self.nodes.push(Node {
            path: path.to_owned(),
            parent,
            children: Vec::new(),
            fileid: hash | 1 << 63,
        });
        self.by_hash.insert(hash, i);
        self.insert(parent, name.as_bytes().to_vec(), Child::Dir(i));
        Some(i)
    }

    fn insert(&mut self, dir: usize, name: Vec<u8>, c: Child) {
        let ch = &mut self.nodes[dir].children;
        match ch.binary_search_by(|(n, _)| n.as_slice().cmp(&name)) {
            Ok(k) => ch[k].1 = c,
            Err(k) => ch.insert(k, (name, c)),
        }
    }

    /// The root's index.
    pub const ROOT: usize = 0;

    /// The export that is the root itself, if one is exported at "/".
    pub fn root_export(&self) -> Option<u32> {
        self.parent_of_export
            .iter()
            .find(|(_, (_, name))| name.is_empty())
            .map(|(id, _)| *id)
    }

    pub fn node(&self, i: usize) -> Option<&Node> {
        self.nodes.get(i)
    }

    /// What `name` is in directory `dir`.
    pub fn child(&self, dir: usize, name: &[u8]) -> Option<Child> {
        let ch = &self.nodes.get(dir)?.children;
        ch.binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|k| ch[k].1)
    }

    /// Where export `id`'s root is: its pseudo directory and name there.
    pub fn parent_of_export(&self, id: u32) -> Option<(usize, &[u8])> {
        self.parent_of_export
            .get(&id)
            .map(|(d, n)| (*d, n.as_slice()))
    }

    /// The handle of pseudo directory `i`.
    pub fn handle(&self, i: usize) -> Option<Vec<u8>> {
        let n = self.nodes.get(i)?;
        let mut h = Vec::with_capacity(PSEUDO_HANDLE_LEN);
        h.push(PSEUDO_HANDLE);
        h.extend_from_slice(&path_hash(&n.path).to_be_bytes());
        Some(h)
    }

    /// The pseudo directory a handle names, if it is one that exists now.
    pub fn of_handle(&self, fh: &[u8]) -> Option<usize> {
        let (&[PSEUDO_HANDLE], rest) = fh.split_first_chunk::<1>()? else {
            return None;
        };
        let hash = u64::from_be_bytes(rest.try_into().ok()?);
        self.by_hash.get(&hash).copied()
    }

    /// The fileid an export's root shows in its pseudo directory (NFSv4
    /// `mounted_on_fileid`): hashed from its path like a pseudo
    /// directory's.
    pub fn fileid_of_path(path: &str) -> u64 {
        path_hash(path) | 1 << 63
    }

    /// Whether `fh` has the pseudo handle format (existing or not).
    pub fn is_pseudo_handle(fh: &[u8]) -> bool {
        fh.len() == PSEUDO_HANDLE_LEN && fh.first() == Some(&PSEUDO_HANDLE)
    }

    /// Directories in the tree.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

impl Default for Pseudo {
    fn default() -> Self {
        Pseudo::build(std::iter::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_join_at_their_paths() {
        let p = Pseudo::build([
            (7, "/srv/a"),
            (8, "/srv/b/c"),
            (9, "/home"),
            (10, "/srv/a/in"),
        ]);
        // / -> home(export 9), srv -> a(export 7), b -> c(export 8).
        assert_eq!(p.child(Pseudo::ROOT, b"home"), Some(Child::Export(9)));
        let Some(Child::Dir(srv)) = p.child(Pseudo::ROOT, b"srv") else {
            panic!("no /srv");
        };
        assert_eq!(p.child(srv, b"a"), Some(Child::Export(7)));
        let Some(Child::Dir(b)) = p.child(srv, b"b") else {
            panic!("no /srv/b");
        };
        assert_eq!(p.child(b, b"c"), Some(Child::Export(8)));
        // An export inside another is reached through the outer one.
        assert_eq!(p.parent_of_export(10), None);
        assert_eq!(p.parent_of_export(8), Some((b, &b"c"[..])));
        assert_eq!(p.node(b).unwrap().parent, srv);
        assert_eq!(p.node(srv).unwrap().parent, Pseudo::ROOT);
        // Names are sorted (READDIR's order).
        let names: Vec<&[u8]> = p
            .node(srv)
            .unwrap()
            .children
            .iter()
            .map(|(n, _)| &n[..])
            .collect();
        assert_eq!(names, [&b"a"[..], b"b"]);
        assert_eq!(p.root_export(), None);
    }

    #[test]
    fn handles_are_stable_and_never_an_exports() {
        let p = Pseudo::build([(7, "/srv/a")]);
        let q = Pseudo::build([(9, "/x"), (7, "/srv/a")]);
        let Some(Child::Dir(srv)) = p.child(Pseudo::ROOT, b"srv") else {
            panic!()
        };
        let h = p.handle(srv).unwrap();
        assert!(Pseudo::is_pseudo_handle(&h));
        let Some(Child::Dir(srv_q)) = q.child(Pseudo::ROOT, b"srv") else {
            panic!()
        };
        // The same path has the same handle in another build.
        assert_eq!(q.of_handle(&h), Some(srv_q));
        assert_eq!(
            p.of_handle(&p.handle(Pseudo::ROOT).unwrap()),
            Some(Pseudo::ROOT)
        );
        assert_eq!(p.of_handle(&[PSEUDO_HANDLE, 0, 0, 0, 0, 0, 0, 0, 1]), None);
        assert_eq!(p.of_handle(&[1, 2, 3]), None);
        assert_ne!(PSEUDO_HANDLE, rnfsd_fs::handle::VERSION);
    }

    #[test]
    fn an_export_at_the_root_is_the_root() {
        let p = Pseudo::build([(3, "/")]);
        assert_eq!(p.root_export(), Some(3));
        assert!(p.node(Pseudo::ROOT).unwrap().children.is_empty());
    }
}
