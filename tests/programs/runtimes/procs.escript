#!/usr/bin/env escript
%% An Erlang program for the runtimes corpus: a thousand processes on the SMP schedulers,
%% message passing, an ETS table, a port to a child process, and an exit status.
main(_) ->
    Self = self(),
    Pids = [spawn(fun() -> Self ! {done, N, lists:sum(lists:seq(1, N * 100))} end) || N <- lists:seq(1, 1000)],
    Sum = lists:sum([receive {done, N, S} -> S rem (N + 7) end || N <- lists:seq(1, length(Pids))]),
    io:format("processes ~p sum ~p~n", [length(Pids), Sum]),
    T = ets:new(t, [set, public]),
    [ets:insert(T, {K, K * K}) || K <- lists:seq(1, 5000)],
    io:format("ets ~p ~p~n", [ets:info(T, size), ets:lookup(T, 77)]),
    io:format("cmd ~s", [os:cmd("seq 1 100 | tail -1")]),
    Port = open_port({spawn, "sh -c 'echo port; exit 3'"}, [exit_status, stream]),
    io:format("port ~p~n", [collect(Port, [])]),
    halt(9).

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, Acc ++ D);
        {Port, {exit_status, S}} -> {string:trim(Acc), S}
    after 10000 -> timeout
    end.
