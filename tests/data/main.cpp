#define BOOST_TEST_MODULE data
#include <boost/test/unit_test.hpp>
