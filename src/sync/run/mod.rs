//! What every step of a run shares, below the engines (`live`, `watch`)
//! and the passes and reviews they call (`passes`, `review`): the run's
//! mode and host writer, its observation, its report and its member
//! requests as data. Kept apart so that `passes` and `review` need nothing
//! of `live`, which calls them: no import runs back up.

pub mod mode;
pub mod observe;
pub mod report;
pub mod work;
