//! The prover's own words for a job and its parts, where proofline names them to a reader.

/// What a prover calls a job and its parts, for the words proofline shows a reader: the text
/// report's headings, the names of trace spans. cuzk's are the default (a sector, its
/// partitions); a prover of batches of segments says `Nouns::new("batch", "segment")`.
/// Metric and JSON field names do not change with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nouns {
    job: String,
    jobs: String,
    part: String,
}

impl Default for Nouns {
    fn default() -> Self {
        Nouns::new("sector", "partition")
    }
}

impl Nouns {
    /// A job and a part, in the singular; the plural of the job is English's usual one
    /// (`batch` → `batches`; [`Nouns::plural`] sets another).
    pub fn new(job: impl Into<String>, part: impl Into<String>) -> Self {
        let job = job.into();
        let jobs = if ["s", "x", "z", "ch", "sh"].iter().any(|e| job.ends_with(e)) {
            format!("{job}es")
        } else {
            format!("{job}s")
        };
        Nouns {
            job,
            jobs,
            part: part.into(),
        }
    }

    /// The plural of the job, where the usual one is wrong.
    pub fn plural(mut self, jobs: impl Into<String>) -> Self {
        self.jobs = jobs.into();
        self
    }

    /// A job (`sector`).
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Jobs (`sectors`).
    pub fn jobs(&self) -> &str {
        &self.jobs
    }

    /// A part of a job (`partition`).
    pub fn part(&self) -> &str {
        &self.part
    }

    /// `JOB,PART` (`batch,segment`), as a command line gives them.
    pub fn parse(s: &str) -> Result<Nouns, String> {
        let (job, part) = s
            .split_once(',')
            .ok_or_else(|| format!("`{s}` is not JOB,PART (e.g. batch,segment)"))?;
        let (job, part) = (job.trim(), part.trim());
        if job.is_empty() || part.is_empty() {
            return Err(format!("`{s}`: both nouns are needed (e.g. batch,segment)"));
        }
        Ok(Nouns::new(job, part))
    }
}

/// `s` with its first letter in capitals.
pub(crate) fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_parsing() {
        assert_eq!(Nouns::default().jobs(), "sectors");
        assert_eq!(Nouns::new("batch", "segment").jobs(), "batches");
        assert_eq!(
            Nouns::new("proof", "circuit").plural("proofs!").jobs(),
            "proofs!"
        );
        let n = Nouns::parse("batch, segment").unwrap();
        assert_eq!((n.job(), n.part()), ("batch", "segment"));
        assert!(Nouns::parse("batch").unwrap_err().contains("JOB,PART"));
        assert!(Nouns::parse("batch,").unwrap_err().contains("both"));
        assert_eq!(capitalized("batches"), "Batches");
    }
}
