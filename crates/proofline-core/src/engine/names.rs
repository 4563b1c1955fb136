//! Interning: job ids and proof kinds become small integers while the engine holds them.
//!
//! A job id is interned once per buffered event and once per job instance that carries it;
//! when the last reference goes, the entry is freed and its slot reused, so the table holds
//! the ids in flight, not every id of the log.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::config::MAX_KINDS;

/// One interned job id.
#[derive(Debug)]
pub(super) struct NameEntry {
    /// The job id as written.
    pub name: Arc<str>,
    /// Buffered events and job instances that refer to this name; the entry is freed at 0.
    pub refs: u32,
    /// The job instance (index into the engine's job table) that events of this name go
    /// to; `None` until the first one is created, and after that instance was removed.
    pub current: Option<usize>,
    /// Instances seen so far (the next attempt number): a retry that reuses the id is a
    /// new instance with the next attempt.
    pub attempts: u32,
    /// Instances of the id in flight besides `current`, each for a request of its own
    /// (`request=`): two requests of one id at once are two jobs. Empty but for them.
    pub others: Vec<usize>,
    /// The highest request number (`request=`) an instance of the id had: a line of a lower
    /// one that has no instance in flight is of a request that ended, never a new request
    /// (a writer numbers the requests of an id upward while any is in flight).
    pub max_request: u32,
    /// A hash of the id, taken once when it was interned (for the table of recent lines and
    /// the kernel attribution's keys, which must not hash the string per event):
    /// [`super::kernel::job_key`].
    pub hash: u64,
}

/// Slots of [`Names::recent`]: a power of two, several times the jobs a prover has in flight.
const RECENT: usize = 256;

/// An empty place of [`Names::recent`].
const NO_SLOT: u32 = u32::MAX;

/// Job ids in flight, reference-counted.
#[derive(Debug)]
pub(super) struct Names {
    /// Job id to slot in `tab`; holds exactly the entries whose `refs > 0`.
    ids: HashMap<Arc<str>, u32>,
    /// Slots, live or free.
    tab: Vec<NameEntry>,
    /// Free slots of `tab`, reused before the table grows.
    free: Vec<u32>,
    /// Slots interned lately, each in the place its id's [`recent_place`] gives: the lines
    /// of the jobs in flight interleave, and a comparison with the id found there costs less
    /// than a hash and a look-up in `ids` (~135 instructions by callgrind; a comparison with
    /// the last id alone spared it for half of the events; on the small TIMELINE-only
    /// benchmark log, 157 473 look-ups of 316 800 interns became 6 129 (callgrind), 6 000 of them new
    /// ids). A place may hold a slot freed or reused since: it is
    /// used only while live and holding the same id.
    recent: [u32; RECENT],
}

impl Default for Names {
    fn default() -> Self {
        Names {
            ids: HashMap::default(),
            tab: Vec::new(),
            free: Vec::new(),
            recent: [NO_SLOT; RECENT],
        }
    }
}

/// The place of an id in [`Names::recent`]: from its length and its last 8 bytes (where
/// the ids of one log differ: a sector or a request number), multiplied and cut to the top
/// bits.
#[inline(always)]
fn recent_place(name: &str) -> usize {
    let b = name.as_bytes();
    let n = b.len();
    let mut w = [0u8; 8];
    if n >= 8 {
        w.copy_from_slice(&b[n - 8..]);
    } else {
        w[..n].copy_from_slice(b);
    }
    let x = u64::from_ne_bytes(w) ^ (n as u64);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RECENT.trailing_zeros())) as usize
}

impl Names {
    /// The id's slot, with one more reference.
    #[inline]
    pub fn intern(&mut self, name: &str) -> u32 {
        let place = recent_place(name);
        let id = self.recent[place];
        if let Some(e) = self.tab.get_mut(id as usize) {
            if e.refs > 0 && same(&e.name, name) {
                e.refs += 1;
                return id;
            }
        }
        let id = self.intern_looked_up(name);
        self.recent[place] = id;
        id
    }

    /// [`Names::intern`] of an id not in its place of `recent`.
    #[inline(never)]
    fn intern_looked_up(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            self.tab[id as usize].refs += 1;
            return id;
        }
        let entry = NameEntry {
            name: Arc::from(name),
            refs: 1,
            current: None,
            attempts: 0,
            others: Vec::new(),
            max_request: 0,
            hash: super::kernel::job_key(name),
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.tab[id as usize] = entry;
                id
            }
            None => {
                self.tab.push(entry);
                (self.tab.len() - 1) as u32
            }
        };
        self.ids.insert(self.tab[id as usize].name.clone(), id);
        id
    }

    /// Drops one reference; the slot is freed at the last.
    #[inline]
    pub fn unref(&mut self, id: u32) {
        let e = &mut self.tab[id as usize];
        e.refs -= 1;
        if e.refs == 0 {
            self.free_slot(id);
        }
    }

    /// Frees a slot whose last reference went.
    #[inline(never)]
    fn free_slot(&mut self, id: u32) {
        let e = &mut self.tab[id as usize];
        self.ids.remove(&e.name);
        e.current = None;
        e.others.clear();
        self.free.push(id);
    }

    /// The entry of a live slot.
    pub fn get(&self, id: u32) -> &NameEntry {
        &self.tab[id as usize]
    }

    /// The entry of a live slot, to change.
    pub fn get_mut(&mut self, id: u32) -> &mut NameEntry {
        &mut self.tab[id as usize]
    }

    /// The job id of a live slot.
    pub fn name(&self, id: u32) -> &Arc<str> {
        &self.tab[id as usize].name
    }

    /// Job ids held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Whether two ids are the same, compared 8 bytes at a time (the last 8 overlapping): for
/// the benchmark logs' ids of a dozen bytes, a call to `memcmp` cost more than the
/// comparison (measured on those only; a longer id takes a word more each 8 bytes).
#[inline(always)]
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let word = |s: &[u8], i: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&s[i..i + 8]);
        u64::from_ne_bytes(w)
    };
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// Proof kinds seen, never freed (there are a handful; past [`MAX_KINDS`] they fold into
/// `other`, so a hostile log cannot grow the table).
#[derive(Debug, Default)]
pub(super) struct Kinds {
    /// Slot to kind.
    tab: Vec<Arc<str>>,
    /// Kind to slot.
    ids: HashMap<Arc<str>, u16>,
}

impl Kinds {
    /// The kind's slot.
    pub fn intern(&mut self, kind: &str) -> u16 {
        if let Some(&id) = self.ids.get(kind) {
            return id;
        }
        let kind: Arc<str> = if self.tab.len() >= MAX_KINDS {
            Arc::from("other")
        } else {
            Arc::from(kind)
        };
        if let Some(&id) = self.ids.get(&kind) {
            return id;
        }
        self.tab.push(kind.clone());
        let id = (self.tab.len() - 1) as u16;
        self.ids.insert(kind, id);
        id
    }

    /// The kind of a slot.
    pub fn name(&self, id: u16) -> &Arc<str> {
        &self.tab[id as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::{Names, same};

    /// Ids of every length from 0 to 39 bytes are the same exactly when their bytes are, wherever
    /// they differ (each byte, in the words and in the overlapping tail).
    #[test]
    fn ids_compare_by_every_byte() {
        for n in 0..40usize {
            let a: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same(&a, &a.clone()), "{n}");
            assert!(!same(&a, &format!("{a}x")), "{n}: lengths differ");
            for at in 0..n {
                let mut b = a.clone().into_bytes();
                b[at] = b'0';
                let b = String::from_utf8(b).unwrap();
                assert!(!same(&a, &b), "{n}: byte {at} differs");
            }
        }
    }

    /// An id interned again right after its slot was freed is a live entry of its own: the
    /// next new id does not take its slot (a freed slot in `recent` is not used).
    #[test]
    fn an_id_freed_and_interned_again_keeps_its_slot() {
        let mut n = Names::default();
        let a = n.intern("a");
        assert_eq!(n.intern("a"), a, "the same id, one more reference");
        n.unref(a);
        n.unref(a);
        assert_eq!(n.len(), 0);
        let a = n.intern("a");
        let x = n.intern("x");
        assert_ne!(a, x);
        assert_eq!((&**n.name(a), &**n.name(x)), ("a", "x"));
        assert_eq!(n.intern("a"), a);
        assert_eq!(n.get(a).refs, 2);
        assert_eq!(n.len(), 2);
    }

    /// Ids that share a place of `recent`, and slots freed and reused by other ids while
    /// `recent` still names them, intern as the table says: the same id the same live
    /// slot, another id another, every count of references right.
    #[test]
    fn recent_places_shared_freed_and_reused_give_the_table_s_slots() {
        use std::collections::HashMap;
        let ids: Vec<String> = (0..2000)
            .map(|i| format!("porep-{}-{}", i / 7, i % 7))
            .collect();
        let mut n = Names::default();
        let mut refs: HashMap<&str, (u32, u32)> = HashMap::new();
        // a pseudo-random walk: intern, or drop a reference, of ids in a moving window
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = &ids[(step / 100 + (x % 40) as usize) % ids.len()];
            let held = refs.get(id.as_str()).copied();
            if x % 3 == 0 {
                if let Some((slot, r)) = held {
                    n.unref(slot);
                    if r == 1 {
                        refs.remove(id.as_str());
                    } else {
                        refs.insert(id, (slot, r - 1));
                    }
                }
                continue;
            }
            let slot = n.intern(id);
            assert_eq!(&**n.name(slot), id.as_str(), "step {step}");
            match held {
                Some((s, r)) => {
                    assert_eq!(slot, s, "step {step}: {id} moved");
                    refs.insert(id, (s, r + 1));
                }
                None => {
                    refs.insert(id, (slot, 1));
                }
            }
            assert_eq!(n.get(slot).refs, refs[id.as_str()].1, "step {step}: {id}");
        }
        assert_eq!(n.len(), refs.len());
        let mut slots: Vec<u32> = refs.values().map(|&(s, _)| s).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), refs.len(), "two live ids in one slot");
    }
}
