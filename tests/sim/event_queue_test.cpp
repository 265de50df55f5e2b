// zab::testing::event_queue — virtual time, ordering (ties in scheduling order),
// cancellation, events that schedule events.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/event_queue.hpp"

using zab::testing::event_queue;
using zab::testing::sim_time;

TEST_CASE("an empty queue runs nothing", "[sim][event_queue]") {
    event_queue events;
    CHECK(events.now() == 0);
    CHECK_FALSE(events.run_next());
    CHECK_FALSE(events.next_time().has_value());
    CHECK(events.size() == 0);
    CHECK(events.events_run() == 0);
}

TEST_CASE("events run in time order and advance now()", "[sim][event_queue]") {
    event_queue events;
    std::vector<std::pair<int, sim_time>> ran;
    events.schedule_at(300, [&] { ran.push_back({3, events.now()}); });
    events.schedule_at(100, [&] { ran.push_back({1, events.now()}); });
    events.schedule_after(200, [&] { ran.push_back({2, events.now()}); });
    CHECK(events.size() == 3);
    CHECK(events.next_time() == sim_time{100});
    while (events.run_next()) {}
    CHECK(ran == std::vector<std::pair<int, sim_time>>{{1, 100}, {2, 200}, {3, 300}});
    CHECK(events.now() == 300);
    CHECK(events.events_run() == 3);
    CHECK(events.size() == 0);
}

TEST_CASE("events at the same time run in scheduling order", "[sim][event_queue]") {
    event_queue events;
    std::string order;
    for (char c = 'a'; c <= 'j'; ++c) events.schedule_at(50, [&order, c] { order += c; });
    // An event scheduled for "now" from inside an event runs after those already due.
    events.schedule_at(40, [&] { events.schedule_at(50, [&] { order += '!'; }); });
    while (events.run_next()) {}
    CHECK(order == "abcdefghij!");
}

TEST_CASE("events may schedule more events, including at the current instant",
          "[sim][event_queue]") {
    event_queue events;
    std::vector<sim_time> times;
    std::function<void()> tick = [&] {
        times.push_back(events.now());
        if (times.size() < 5) events.schedule_after(times.size() % 2 == 0 ? 0 : 10, tick);
    };
    events.schedule_at(7, tick);
    while (events.run_next()) {}
    CHECK(times == std::vector<sim_time>{7, 17, 17, 27, 27});
}

TEST_CASE("cancelled events never run", "[sim][event_queue]") {
    event_queue events;
    std::string order;
    const auto a = events.schedule_at(10, [&] { order += 'a'; });
    const auto b = events.schedule_at(10, [&] { order += 'b'; });
    const auto c = events.schedule_at(20, [&] { order += 'c'; });
    CHECK(a != b);
    CHECK(a != 0);
    CHECK(events.cancel(b));
    CHECK_FALSE(events.cancel(b));  // twice
    CHECK_FALSE(events.cancel(12345));
    CHECK(events.size() == 2);
    // An event may cancel a later one.
    events.schedule_at(15, [&] { CHECK(events.cancel(c)); });
    while (events.run_next()) {}
    CHECK(order == "a");
    CHECK_FALSE(events.cancel(a));  // already ran
    CHECK(events.events_run() == 2);
}

TEST_CASE("run_until runs what is due and moves time to the deadline", "[sim][event_queue]") {
    event_queue events;
    int ran = 0;
    events.schedule_at(5, [&] {
        ++ran;
        events.schedule_at(8, [&] { ++ran; });
    });
    events.schedule_at(10, [&] { ++ran; });
    events.schedule_at(11, [&] { ++ran; });
    CHECK(events.run_until(10) == 3);
    CHECK(ran == 3);
    CHECK(events.now() == 10);
    CHECK(events.run_until(1000) == 1);
    CHECK(events.now() == 1000);
    CHECK(events.empty());
    // A later schedule_after counts from the new now.
    events.schedule_after(1, [] {});
    CHECK(events.next_time() == sim_time{1001});
}
