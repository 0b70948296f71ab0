// parse_duration, time_budget, the Slurm time left and time_to_stop (time_limit.hpp).
#include "hpctrain/train/time_limit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {
namespace {

// A whole number of at most `digits` characters, or -1.
long parse_field(const std::string& text, std::size_t digits) {
  if (text.empty() || text.size() > digits) return -1;
  for (const char c : text)
    if (c < '0' || c > '9') return -1;
  return std::stol(text);
}

// "HH:MM:SS" -> seconds, -1 when malformed (minutes and seconds < 60).
double parse_clock(const std::string& text) {
  std::istringstream in(text);
  std::string h, m, s;
  if (!std::getline(in, h, ':') || !std::getline(in, m, ':') || !std::getline(in, s, ':') || !in.eof()) return -1;
  const long hours = parse_field(h, 6), minutes = parse_field(m, 2), seconds = parse_field(s, 2);
  if (hours < 0 || minutes < 0 || minutes >= 60 || seconds < 0 || seconds >= 60) return -1;
  return static_cast<double>(hours * 3600 + minutes * 60 + seconds);
}

// Plain seconds ("90", "90.5") -> seconds, -1 when malformed.
double parse_seconds(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return -1;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() ? value : -1;
}

}  // namespace

double parse_duration(const std::string& text, const char* flag) {
  const double seconds = text.find(':') != std::string::npos ? parse_clock(text) : parse_seconds(text);
  HPCTRAIN_CHECK(seconds > 0 && std::isfinite(seconds),
                 "{} '{}': expected HH:MM:SS (e.g. 01:30:00) or seconds > 0 (e.g. 5400)", flag, text);
  return seconds;
}

double time_budget(double max_time, const char* slurm_job_end_time, double now_epoch) {
  double budget = max_time > 0 ? max_time : std::numeric_limits<double>::infinity();
  if (slurm_job_end_time != nullptr && *slurm_job_end_time != '\0') {
    const double end = parse_seconds(slurm_job_end_time);
    HPCTRAIN_CHECK(end > 0, "SLURM_JOB_END_TIME '{}': expected the job's end time in epoch seconds",
                   slurm_job_end_time);
    budget = std::min(budget, end - now_epoch);
  }
  return budget;
}

std::optional<double> parse_slurm_time_left(const std::string& text) {
  std::string clock = text;
  long days = 0;
  if (const auto dash = clock.find('-'); dash != std::string::npos) {
    days = parse_field(clock.substr(0, dash), 5);
    clock = clock.substr(dash + 1);
    if (days < 0) return std::nullopt;
  }
  const auto colons = std::count(clock.begin(), clock.end(), ':');
  const std::string padded = colons == 2 ? clock : colons == 1 ? "0:" + clock : "0:0:" + clock;
  const double seconds = parse_clock(padded);
  if (seconds < 0) return std::nullopt;
  return static_cast<double>(days) * 86400 + seconds;
}

std::optional<double> slurm_time_left() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* end = std::getenv("SLURM_JOB_END_TIME");
  if (job == nullptr || *job == '\0' || (end != nullptr && *end != '\0')) return std::nullopt;
  if (std::string(job).find_first_not_of("0123456789_") != std::string::npos) return std::nullopt;
  const std::string command = std::string("squeue -h -j ") + job + " -o %L 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  char line[128] = {};
  const bool got = std::fgets(line, sizeof line, pipe) != nullptr;
  ::pclose(pipe);
  if (!got) return std::nullopt;
  std::string text(line);
  text.erase(text.find_last_not_of(" \n\r\t") + 1);
  return parse_slurm_time_left(text);
}

double StopMargin::seconds() const { return std::max(minimum, longest_step + last_save); }

bool time_to_stop(double elapsed, double budget, const StopMargin& margin) {
  return std::isfinite(budget) && elapsed + margin.seconds() >= budget;
}

}  // namespace hpctrain::train
