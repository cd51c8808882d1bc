"""bAbI's world (Weston et al. 2015), as BABILong's qa1–qa10 tell it: actors move between rooms, pick up, drop
and hand over objects, are said to be (or not to be, or to be one of two places); a story is the sentences those
events are told in, and each task asks one question of the world the story leaves. The answer is read off the
simulated world, the supporting facts are the sentences it rests on; every other sentence is a distractor of
the same form. Names, rooms, objects and wordings are bAbI's (those BABILong's answer labels list)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

ACTORS = ("Daniel", "John", "Mary", "Sandra")
GIVERS = ("Bill", "Fred", "Jeff", "Mary")  # qa5's
INDEFINITE_ACTORS = ("Bill", "Fred", "Julie", "Mary")  # qa10's
ROOMS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")  # qa10's
OBJECTS = ("apple", "football", "milk")
MOVES = ("went to", "journeyed to", "travelled to", "moved to", "went back to")
GETS = ("got", "took", "picked up", "grabbed")
DROPS = ("dropped", "discarded", "put down", "left")
GIVES = ("gave", "handed", "passed")
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
COUNTS = ("none", "one", "two", "three")
NEGATIONS = ("not ", "no longer ")  # bAbI's two renderings of a false "is in"
# each task's fewest and most sentences (qa4's are bAbI's two); a task file may set others
STORY_FACTS = {1: (2, 10), 2: (4, 20), 3: (8, 30), 4: (2, 2), 5: (4, 20)}
STORY_FACTS |= {n: (2, 12) for n in range(6, 11)}
# the fewest sentences a question can rest on: qa3 a move, a taking and a move with it; qa5 two actors coming
# into one room, a taking and a give (fewer, and no story could be told)
FEWEST_FACTS = {3: 3, 5: 4}


@dataclass(frozen=True)
class Story:
    facts: tuple[str, ...]  # the sentences, in the story's order
    question: str
    answer: str  # as BABILong's targets: a word, or objects joined by "," (qa8)
    supporting: tuple[int, ...]  # indices of the facts the answer rests on


@dataclass
class World:
    """Where everyone and everything is, and which sentence said so."""

    where: dict = field(default_factory=dict)  # actor -> room, or ("not", room) / ("either", a, b) (qa9, qa10)
    actual: dict = field(default_factory=dict)  # actor -> the room it is really in, whatever the story says
    told: dict = field(default_factory=dict)  # actor -> the fact that last set `where`
    holder: dict = field(default_factory=dict)  # object -> the actor holding it
    lies: dict = field(default_factory=dict)  # object -> (room, the facts saying so) while no one holds it
    held: dict = field(default_factory=dict)  # object -> the last fact that took, dropped or handed it
    trail: dict = field(default_factory=dict)  # object -> [(room, fact, support)] each time it came to another room
    changed: dict = field(default_factory=dict)  # actor -> the facts that changed what they carry
    gives: list = field(default_factory=list)  # (giver, object, receiver, fact) in order

    def room(self, actor: str) -> str | None:
        place = self.where.get(actor)
        return place if isinstance(place, str) else None

    def place_of(self, thing: str) -> tuple[str, tuple[int, ...]] | None:
        """An object's room and the facts that say it (the taking or dropping, and where its holder went)."""
        if thing in self.holder:
            actor = self.holder[thing]
            return self.room(actor), (self.held[thing], self.told[actor])
        return self.lies.get(thing)

    def carried(self, actor: str) -> list[str]:
        return sorted(o for o, a in self.holder.items() if a == actor)

    def arrive(self, thing: str, room: str, fact: int, support: tuple[int, ...] = ()) -> None:
        """`thing` is in `room` by `fact`; `support`: the facts that placed it in the room it left (its holder's
        arrival there and its taking), bAbI's two facts of each step of an object's history."""
        trail = self.trail.setdefault(thing, [])
        if not trail or trail[-1][0] != room:
            trail.append((room, fact, support))


def there(rng: random.Random) -> str:
    """bAbI tells a taking or dropping with or without "there" ("Sandra took the football.")."""
    return " there" if rng.random() < 0.5 else ""


def tell(rng: random.Random, world: World, task: int, index: int) -> str | None:
    """One event that can happen in `world` for `task`, applied, as its sentence; None where the drawn kind of
    event cannot happen now (the caller draws again)."""
    actors = GIVERS if task == 5 else INDEFINITE_ACTORS if task == 10 else ACTORS
    rooms = PLACES if task == 10 else ROOMS
    # bAbI's mix: qa9 a move or a statement, true or false, as often (moves 1/2); qa10 a move, a statement or
    # an "either" as often
    kinds = {1: ("move",), 9: ("move", "move", "is", "not"), 10: ("move", "is", "either")}.get(task)
    kinds = kinds or ("move", "move", "get", "drop") + (("give",) if task in (5, 7, 8) else ())
    kind, actor = rng.choice(kinds), rng.choice(actors)
    if kind == "move":
        room = rng.choice([r for r in rooms if r != world.actual.get(actor)])
        came = world.told.get(actor)  # the fact that put the actor where it leaves
        world.where[actor], world.told[actor] = room, index
        world.actual[actor] = room
        for thing in world.carried(actor):
            world.arrive(thing, room, index, (came, world.held[thing]))
        return f"{actor} {rng.choice(MOVES)} the {room}."
    if kind in ("is", "not"):
        # as bAbI's `set`: a statement tells where the actor really is, a negation one room it is not in; the
        # story never contradicts the world (an actor no sentence placed yet is somewhere, drawn now)
        here = world.actual.setdefault(actor, rng.choice(rooms))
        room = here if kind == "is" else rng.choice([r for r in rooms if r != here])
        world.where[actor], world.told[actor] = (room if kind == "is" else ("not", room)), index
        negation = rng.choice(NEGATIONS) if kind == "not" else ""
        return f"{actor} is {negation}in the {room}."
    if kind == "either":
        first, second = rng.sample(rooms, 2)
        world.where[actor], world.told[actor] = ("either", first, second), index
        return f"{actor} is either in the {first} or the {second}."
    room = world.room(actor)
    if room is None:
        return None
    mine = world.carried(actor)
    if kind == "get":
        free = [o for o in OBJECTS if o not in world.holder and world.lies.get(o, (room,))[0] == room]
        if not free:
            return None
        thing = rng.choice(free)
        world.holder[thing], world.held[thing] = actor, index
        world.lies.pop(thing, None)
        world.arrive(thing, room, index)
        world.changed.setdefault(actor, []).append(index)
        return f"{actor} {rng.choice(GETS)} the {thing}{there(rng)}."
    if not mine:
        return None
    thing = rng.choice(mine)
    if kind == "drop":
        del world.holder[thing]
        world.held[thing] = index
        world.lies[thing] = (room, (index, world.told[actor]))
        world.changed.setdefault(actor, []).append(index)
        return f"{actor} {rng.choice(DROPS)} the {thing}{there(rng)}."
    others = [a for a in actors if a != actor and world.room(a) == room]
    if not others:
        return None
    receiver = rng.choice(others)
    world.holder[thing], world.held[thing] = receiver, index
    world.gives.append((actor, thing, receiver, index))
    for who in (actor, receiver):
        world.changed.setdefault(who, []).append(index)
    return f"{actor} {rng.choice(GIVES)} the {thing} to {receiver}."


def ask(rng: random.Random, world: World, task: int) -> tuple[str, str, tuple[int, ...]] | None:
    """(question, answer, supporting facts) of `task` about the world a story left; None where it holds nothing
    the task can ask (the caller tells another story)."""
    rooms = PLACES if task == 10 else ROOMS
    if task in (1, 6):
        placed = sorted(a for a in world.where if world.room(a))
        if not placed:
            return None
        actor = rng.choice(placed)
        room, support = world.room(actor), (world.told[actor],)
        if task == 1:
            return f"Where is {actor}?", room, support
        asked = room if rng.random() < 0.5 else rng.choice([r for r in rooms if r != room])
        return f"Is {actor} in the {asked}?", "yes" if asked == room else "no", support
    if task == 2:
        known = [o for o in OBJECTS if world.place_of(o) is not None]
        if not known:
            return None
        thing = rng.choice(known)
        room, support = world.place_of(thing)
        return f"Where is the {thing}?", room, tuple(sorted(set(support)))
    if task == 3:
        moved = [o for o in OBJECTS if len(world.trail.get(o, ())) >= 2]
        if not moved:
            return None
        thing = rng.choice(moved)
        (before, _, _), (now, went, placed) = world.trail[thing][-2:]
        return f"Where was the {thing} before the {now}?", before, tuple(sorted({went, *placed}))
    if task == 5:
        if not world.gives:
            return None
        # any give of the story, not only its last (bAbI asks one followed by up to five more sentences); the
        # answer is the latest give the question's words match, as bAbI's world knows it when asked
        giver, thing, receiver, _ = rng.choice(world.gives)
        forms = (  # (question, what it names of a give: giver, object, receiver; None where it asks)
            (f"Who gave the {thing} to {receiver}?", (None, thing, receiver)),
            (f"Who gave the {thing}?", (None, thing, "")),
            (f"Who did {giver} give the {thing} to?", (giver, thing, None)),
            (f"Who received the {thing}?", ("", thing, None)),
            (f"What did {giver} give to {receiver}?", (giver, None, receiver)),
        )
        question, named = rng.choice(forms)
        give = next(g for g in reversed(world.gives) if all(n in (None, "", v) for n, v in zip(named, g)))
        return question, give[named.index(None)], (give[3],)
    if task in (7, 8):
        actors = sorted(world.changed)
        if not actors:
            return None
        actor = rng.choice(actors)
        mine, support = world.carried(actor), tuple(world.changed[actor])
        if task == 7:
            return f"How many objects is {actor} carrying?", COUNTS[len(mine)], support
        return f"What is {actor} carrying?", ",".join(mine) if mine else "nothing", support
    if task in (9, 10):
        known = sorted(world.where)
        if not known:
            return None
        actor = rng.choice(known)
        place, support = world.where[actor], (world.told[actor],)
        if isinstance(place, str):
            asked = place if rng.random() < 0.5 else rng.choice([r for r in rooms if r != place])
            return f"Is {actor} in the {asked}?", "yes" if asked == place else "no", support
        if place[0] == "not":
            return f"Is {actor} in the {place[1]}?", "no", support
        asked = rng.choice(place[1:]) if rng.random() < 0.5 else rng.choice([r for r in rooms if r not in place])
        return f"Is {actor} in the {asked}?", "maybe" if asked in place else "no", support
    raise ValueError(f"no bAbI task qa{task} here")


def directions(rng: random.Random) -> Story:
    """qa4, two-argument relations: two facts placing two rooms on either side of a third, on one line; the
    question asks one relation, from either side ("What is north of the B?", "What is the B north of?")."""
    centre, first, second = rng.sample(ROOMS, 3)
    one = rng.choice(sorted(OPPOSITE))
    other = OPPOSITE[one]  # the three rooms on one line, as bAbI's IsDir sets them
    facts = []
    for room, way in ((first, one), (second, other)):  # `room` is `way` of the centre: told from either side
        told = f"The {room} is {way} of the {centre}." if rng.random() < 0.5 else None
        facts.append(told or f"The {centre} is {OPPOSITE[way]} of the {room}.")
    asked = rng.randrange(2)
    room, way = ((first, one), (second, other))[asked]
    if rng.random() < 0.5:
        return Story(tuple(facts), f"What is {way} of the {centre}?", room, (asked,))
    return Story(tuple(facts), f"What is the {centre} {OPPOSITE[way]} of?", room, (asked,))


def story(rng: random.Random, task: int, facts: tuple[int, int] | None = None) -> Story:
    """A story of bAbI's task `task` (1–10) with between `facts` sentences (default STORY_FACTS), and its
    question, answer and supporting facts."""
    if task == 4:
        return directions(rng)
    low, high = facts or STORY_FACTS[task]
    while True:
        world, told = World(), []
        count = rng.randint(low, high)
        while len(told) < count:
            sentence = tell(rng, world, task, len(told))
            if sentence is not None:
                told.append(sentence)
        asked = ask(rng, world, task)
        if asked is not None:
            question, answer, supporting = asked
            return Story(tuple(told), question, answer, supporting)
